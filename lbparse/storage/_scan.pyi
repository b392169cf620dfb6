"""Type stub of lbparse/storage/_scan.c (the segment reader's entry loop in C)."""

from typing import Any

def scan(
    data: Any,
    pos: int,
    end: int,
    header: tuple[Any, ...],
    body: tuple[Any, ...],
    crc_kind: int,
    entry_cls: type,
    entries: list[Any],
    positions: list[int],
) -> int: ...
def crc(data: Any, kind: int) -> int: ...
def implementation() -> str: ...
def jsonl(prefix: bytes, positions: list[int], entries: list[Any]) -> bytes: ...
