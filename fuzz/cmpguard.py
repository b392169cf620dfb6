"""A guard around atheris's comparison hook, so that a long campaign's memory stays flat.

atheris (3.0.0) replaces every `<`, `==`, ... of instrumented code with a call
to `atheris._trace_cmp`, which reports int, str and bytes comparisons to
libFuzzer and returns the comparison's result. It keeps a reference to that
result: harmless for True and False, but a comparison of numpy arrays
(`codes == code` in the batch decoder) returns a new array, and each one was
kept for the rest of the process. The `batch` target lost ~100 KB an
execution this way until libFuzzer's 2 GB limit ended it (issue #19's
campaign, 18,849 executions; tests/project/test_fuzz_targets.py measures it).

`install()` hands atheris only the comparisons it reports (operands of those
exact types, whose results are bools) and compares everything else in
Python: the fuzzer loses no feedback, and no result is kept. `atheris.Fuzz()`
binds its own hook when it starts, so `guarding(target)` installs the guard
at each input (a check when it is in place).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

# What atheris's hook reports to libFuzzer (ints as integer comparisons,
# str and bytes as memcmp); every comparison of these gives a bool.
TRACED = frozenset({int, bool, str, bytes})
# dis.cmp_op's order: COMPARE_OP's argument (shifted on Python 3.12+).
_OPS = (operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge)


def guarded(native: Callable[..., Any], shift: int) -> Callable[..., Any]:
    """A `_trace_cmp` that calls `native` only for the TRACED types."""

    def trace_cmp(left: Any, right: Any, op: int, counter: int, is_const: bool) -> Any:
        if type(left) in TRACED and type(right) in TRACED:
            return native(left, right, op, counter, is_const)
        # atheris puts a constant first and mirrors the operator to match,
        # so the operands in this order with this operator are the original.
        # atheris instruments only operators of dis.cmp_op: the index is in range.
        return _OPS[op >> shift](left, right)

    trace_cmp.native = native  # type: ignore[attr-defined]
    return trace_cmp


def install() -> None:
    """Guard atheris's hook (idempotent); instrumented code looks it up at each call."""
    import atheris

    if not hasattr(atheris._trace_cmp, "native"):
        from atheris.version_dependent import CMP_OP_SHIFT_AMOUNT

        atheris._trace_cmp = guarded(atheris._trace_cmp, CMP_OP_SHIFT_AMOUNT)


def guarding(target: Callable[[bytes], None]) -> Callable[[bytes], None]:
    """`target`, with the guard installed before each input (see above)."""

    def one_input(data: bytes) -> None:
        install()
        target(data)

    return one_input
