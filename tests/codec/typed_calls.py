"""The public API as its users' type checkers see it: checked by `make typecheck`.

mypy --strict reads this file with lbparse (pyproject.toml [tool.mypy] `files`);
nothing runs it. The right calls must type-check as they are. Each wrong one
carries the `type: ignore[code]` of the error mypy must give there: strict's
warn_unused_ignores makes an ignore that silences nothing an error, so an API
that stops refusing a wrong call (an option loosened to Any, made positional,
a field made writable) fails `make typecheck` and CI.

(It was a test that ran mypy itself, test_api_types.py: a minute of the
quick lane on a cold cache, and a second mypy run in CI.)
"""

from __future__ import annotations

import lbparse


def right_calls() -> None:
    env: lbparse.Envelope = lbparse.decode(b"", "v0")
    env = lbparse.decode(b"", layout="auto", verify_crc=False, lenient=False, limits=None)
    env = lbparse.decode(bytearray(b""), "legacy", payload_type="proto.Ack")
    name: str | None = env.msg_type_name
    wire: bytes = lbparse.encode(env.message, layout="v0", crc=True)
    print(name, wire)


def wrong_calls(env: lbparse.Envelope) -> None:
    lbparse.decode(b"", "v0", lenient="yes")  # type: ignore[arg-type]
    lbparse.decode(b"", "v0", verify_crcc=True)  # type: ignore[call-arg]
    lbparse.decode(b"", "v0", True)  # type: ignore[misc]
    layout: int = env.layout  # type: ignore[assignment]
    env.layout = "v0"  # type: ignore[misc]
    print(layout)
