"""Type stub of lbparse/raft/_transport.c (the Raft transport's RPC reader in C)."""

from typing import Any

class Reader:
    def __init__(
        self,
        structs: tuple[Any, ...],
        requests: dict[int, int],
        responses: tuple[int, ...],
        max_pending: int,
        rows: tuple[Any, ...] = ...,
        /,
    ) -> None: ...
    def read_request(self, buf: Any, pos: int, limit: int, /) -> Any: ...
    def read_response(self, buf: Any, pos: int, limit: int, /) -> Any: ...
    def rows(self, buf: Any, request: bool, limit: int, /) -> Any: ...
    def stream_rows(
        self,
        streams: dict[Any, Any],
        src: list[str],
        dst: list[str],
        subject: list[str],
        payload: list[bytes | None],
        fallback: Any,
        /,
    ) -> tuple[bytes, ...]: ...
