"""Types of the C protobuf reader (_structs.c)."""

from typing import Any

class Program:
    def __init__(self, spec: tuple[Any, ...]) -> None: ...
    def decode(self, data: Any, starts: Any, ends: Any) -> tuple[bytes, tuple[Any, ...]]: ...
