"""The errors lbparse raises on purpose: one family, `LbparseError`.

Every exception lbparse raises to say something about its input or about
an operation derives from `LbparseError`, in one of two branches:

- `InputError` (also a `ValueError`): the bytes, the file, the JSON or
  the option value given is wrong. `EnvelopeError` (here),
  `lbparse.capture.CaptureError`, `lbparse.raft.RaftError`,
  `lbparse.storage.StorageError`, `lbparse.codec.flatbuf.FlatBufferError`
  and the command line's `UsageError` are input errors.
- `OperationalError` (also a `RuntimeError`): the input may be fine but
  the work could not be done: a server that does not answer
  (`lbparse.streams.client.StreamsError`; `lbparse.live.subscriber.NotConnected`,
  which stays a `ConnectionError`), an output refused or not written
  (`lbparse.outputs.OutputError`, which stays a `ValueError` too), a job
  that failed (`lbparse.pipeline.job.JobFailed`), a generator or a tool
  that failed (`lbparse.codegen.targets.CodegenError`), an optional part
  not installed (`lbparse.extras.MissingExtra`, a `ModuleNotFoundError`).
  One member is warned, not raised: `FastPathWarning` (also a
  `RuntimeWarning`), a fast path that failed on a batch whose rows the
  Python reference then decoded.

Every member is built the same way, `Cls(kind, message, *, offset=None,
position=None, path=None)` (a subclass may add keywords of its own), and
has `.kind` (one of the class's `KINDS`, checked when it is built: an
unknown kind is a bug, a plain `ValueError`), `.message` (what was found,
without where), `.offset` (a byte offset in the bytes given), `.position`
(a byte position in a file), `.path` (the file), `.where` (the offset, or
else the position: None when there is neither) and one JSON shape,
`{"error": kind, "message": message, ..., "where": {"offset": ...,
"position": ..., "path": ...}}`, where a subclass may add keys between
`message` and `where` (`limit` for an `EnvelopeError` a resource limit
refused). `str(exc)` is the one line the command line prints.

What stays a builtin exception (tests/base/test_error_family.py lists each
place, so a new one is a decision): a `TypeError` for an argument of the
wrong type (a program's mistake, not its data's), `NotImplementedError` in
an abstract method, the `AttributeError` and `KeyError` of Python's own
protocols (a module's `__getattr__`, a mapping's `__getitem__`), an
`OSError` where a file-object or file-system contract says OSError (a pipe
that cannot seek, no fresh temporary name), an exception raised and
caught in the same function (control flow), and the `ValueError` of an
unknown kind here. A private exception class (`_Silent`) is a signal
between the functions of one module that never leaves it; it need not
join the family.

How the command line ends for each member (its exit status) is decided in
one place, `lbparse.cli.status.exit_status`.

Every failure to decode input bytes is an `EnvelopeError` whose `kind` is
one of `ENVELOPE_KINDS` (also `KINDS`, its older name), listed in the order a
strict decoder checks them. The message says what was found and where;
`offset`, `expected` and `actual` carry the same facts for programs. When a
resource limit refused the bytes (see `lbparse.codec.limits`), `limit`
names it (`max_payload`, `max_depth`) and `expected` is its value;
otherwise `limit` is None.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "ENVELOPE_KINDS",
    "KINDS",
    "EnvelopeError",
    "FastPathWarning",
    "InputError",
    "LbparseError",
    "OperationalError",
]

ENVELOPE_KINDS: tuple[str, ...] = (
    "too_short",
    "bad_magic",
    "unknown_version",
    "bad_header_len",
    "crc_missing",
    "truncated",
    "crc_mismatch",
    "unknown_msg_type",
    "bad_payload",
)
KINDS = ENVELOPE_KINDS  # the older name, kept for callers (lbparse.KINDS)


def _restore(cls: type[LbparseError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    # Exceptions cross processes (Spark's workers, multiprocessing) pickled;
    # BaseException's own reduce would call cls(*args) with the message alone.
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class LbparseError(Exception):
    """Something lbparse says on purpose: the base of all its errors.

    Catch `InputError` for "these bytes (this file, this value) are wrong",
    `OperationalError` for "the work could not be done", or this class for both.

    Args:
        kind: What went wrong, one of the class's KINDS.
        message: What went wrong, for people (also `str(error)`).
        offset: The byte offset in the input the error concerns, if any.
        position: A position that is not a byte offset (a record's, a line's).
        path: The file the error concerns, if any.

    Raises:
        ValueError: `kind` is not one of the class's KINDS (a bug of the
            caller, so not a member of the family).
    """

    # The kinds this class may be built with; each subclass declares its own.
    KINDS: ClassVar[frozenset[str]] = frozenset()

    kind: str
    message: str
    offset: int | None
    position: int | None
    path: str | None

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        offset: int | None = None,
        position: int | None = None,
        path: str | None = None,
    ) -> None:
        if kind not in type(self).KINDS:
            raise ValueError(
                f"unknown {type(self).__name__} kind {kind!r}; "
                f"its kinds: {', '.join(sorted(type(self).KINDS))}"
            )
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.offset = offset
        self.position = position
        self.path = None if path is None else str(path)

    @property
    def where(self) -> int | None:
        """The byte offset (or else position) the error concerns, None when it has none."""
        return self.offset if self.offset is not None else self.position

    def where_json(self) -> dict[str, Any]:
        """Where, as `to_json_dict` gives it: always the three keys.

        Returns:
            {"offset": ..., "position": ..., "path": ...}, None where unknown.
        """
        return {"offset": self.offset, "position": self.position, "path": self.path}

    def _json_extra(self) -> dict[str, Any]:
        """A subclass's own keys, between `message` and `where`."""
        return {}

    def to_json_dict(self) -> dict[str, Any]:
        """The error as one JSON object, the same shape for the whole family.

        Returns:
            {"error": kind, "message": ..., a subclass's own keys, "where": where_json()}.
        """
        return {
            "error": self.kind,
            "message": self.message,
            **self._json_extra(),
            "where": self.where_json(),
        }

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), self.args, dict(self.__dict__)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind!r}, {self.message!r})"


class InputError(LbparseError, ValueError):
    """lbparse refused these bytes, this file, this JSON or this value."""

    KINDS: ClassVar[frozenset[str]] = frozenset(
        {
            "bad_input",  # bytes or text that are not what they should be
            "bad_json",  # JSON that does not fit what it describes
            "bad_option",  # an option's (or an argument's) value
            "bad_spec",  # a spec (Kaitai, protobuf) with what a generator cannot translate
            "no_input",  # an input that is not there
        }
    )


class OperationalError(LbparseError, RuntimeError):
    """The work could not be done: a server, a tool, an output or a job failed."""

    KINDS: ClassVar[frozenset[str]] = frozenset(
        {
            "failed",  # a step that did not succeed, the message says why
            "unreachable",  # a server that does not answer
        }
    )


class FastPathWarning(OperationalError, RuntimeWarning):
    """A fast path failed on a batch, and the Python reference decoded its rows.

    Warned (`warnings.warn`), not raised: the rows are the reference's, so
    the result is right, only slower. It is still a bug of lbparse (each
    fast path is tested equal to its reference), worth a report with the
    message. lbparse's own test suite turns it into an error
    (pyproject.toml's `filterwarnings`), so no test corpus falls back unseen.

    Args:
        kind: "fast_path_failed".
        message: Which fast path, on how many rows, and the exception it raised.
    """

    KINDS: ClassVar[frozenset[str]] = frozenset({"fast_path_failed"})


class EnvelopeError(InputError):
    """Bytes that are not a well-formed envelope of the requested layout.

    Args:
        kind: One of ENVELOPE_KINDS ("too_short", "bad_magic", ...).
        message: What was found, for people.
        offset: The byte offset in the envelope where it was found.
        expected: The value a well-formed envelope has there, if one.
        actual: The value found there.
        limit: The resource limit that refused the bytes, if one did.
    """

    KINDS: ClassVar[frozenset[str]] = frozenset(ENVELOPE_KINDS)

    expected: Any
    actual: Any
    limit: str | None

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        offset: int | None = None,
        expected: Any = None,
        actual: Any = None,
        limit: str | None = None,
    ) -> None:
        super().__init__(kind, message, offset=offset)
        self.expected = expected
        self.actual = actual
        self.limit = limit

    def _json_extra(self) -> dict[str, Any]:
        return {} if self.limit is None else {"limit": self.limit}
