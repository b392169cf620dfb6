"""lbparse's JSON convention, in one place.

- Inside payloads, protobuf's canonical JSON mapping (what
  `json_format.MessageToDict` gives): lowerCamelCase field names, 64-bit
  integers as decimal strings, bytes as base64, enums by name, default
  values left out.
- lbparse's own fields (the envelope, commit-log entries, records,
  errors, statistics) in snake_case.
- 64-bit integers of lbparse's own fields (offsets, epochs, timestamps,
  nanosecond times) as decimal strings too, as that mapping writes int64:
  JSON numbers past 2**53 lose digits in JavaScript, jq and many other
  readers. Times are integer nanoseconds since the Unix epoch.

`to_json_dict()` methods give Python values: a 64-bit integer there is an
`Int64`, an `int` that compares equal to the number it holds (so the
reference vectors' `expect` objects, which hold plain numbers, compare
equal to them), and `dumps` writes it as a decimal string. Readers take
either form back (`int64`), so JSON written by older versions still reads.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lbparse.errors import InputError

__all__ = ["Int64", "dumps", "dumps_plain", "int64", "to_json_value"]

_DECIMAL = re.compile(r"-?[0-9]+")


class Int64(int):
    """A 64-bit integer of lbparse's own JSON: JSON text holds it as a decimal string."""

    __slots__ = ()

    def __repr__(self) -> str:
        return int.__repr__(self)


# Values that are their own JSON value, by exact type (an Int64 is not one):
# a record's dict is mostly these, and is walked once a message.
_AS_THEY_ARE = frozenset({str, int, float, bool, type(None)})


def to_json_value(obj: Any) -> Any:
    """`obj` with every Int64 made a decimal string (dicts, lists, tuples walked).

    Args:
        obj: A JSON-ready value, Int64s anywhere in it.

    Returns:
        The same shape (tuples as lists), Int64s as decimal strings.
    """
    kind = type(obj)
    if kind is dict:
        return {k: v if type(v) in _AS_THEY_ARE else to_json_value(v) for k, v in obj.items()}
    if kind in _AS_THEY_ARE:
        return obj
    if isinstance(obj, dict):
        return {k: to_json_value(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json_value(v) for v in obj]
    if isinstance(obj, Int64):
        return str(int(obj))
    return obj


# One encoder, made once: json.dumps with any argument besides the object
# makes a new JSONEncoder each call (a third of the time of a record's JSON).
_COMPACT = json.JSONEncoder(ensure_ascii=False)


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """JSON text of `obj` by lbparse's convention (UTF-8 kept as it is).

    Args:
        obj: A JSON-ready value; its Int64s are written as decimal strings.
        indent: Indent by this many spaces; None: compact, one line.

    Returns:
        The JSON text.
    """
    if indent is None:
        return _COMPACT.encode(to_json_value(obj))
    return json.dumps(to_json_value(obj), ensure_ascii=False, indent=indent)


def dumps_plain(obj: Any) -> str:
    """`dumps` of a value that holds no Int64, without its walk of every value.

    Protobuf's MessageToDict writes 64-bit integers as strings itself.

    Args:
        obj: Plain JSON values only (dict, list, str, int, float, bool, None).

    Returns:
        The JSON text, as `dumps` would write it.
    """
    return _COMPACT.encode(obj)


def int64(value: Any, what: str = "value") -> int:
    """A 64-bit integer read from JSON.

    A decimal string, or a number (as older output and hand-written JSON give
    it).

    Args:
        value: The JSON value.
        what: The field's name, for the message.

    Returns:
        The integer.

    Raises:
        InputError: `value` is neither an integer nor a decimal string.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InputError("bad_json", f"{what} is {value!r}, not an integer or a decimal string")
    if isinstance(value, str) and not _DECIMAL.fullmatch(value):
        raise InputError("bad_json", f"{what} is {value!r}, not a decimal integer")
    return int(value)
