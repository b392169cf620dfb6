"""`lbparse tap` and `record`: a malformed --nkey seed, a --creds file without
its JWT or seed, and a "server" whose first line never ends are one line each
(issue #27), where they were nats-py's or asyncio's traceback or words
("Separator is not found, and chunk exceed the limit", status 2). Real
nats-servers with nkey and operator auth; a tiny TCP server on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
from support.cli import run_cli
from support.nats import nkey_user, operator_setup
from test_live_hardening import configured  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow

COMMANDS = [("tap",), ("record", "-o", "{tmp}/out.jsonl")]


def _run(
    srv_url: str, command: tuple[str, ...], tmp_path: Path, *options: str
) -> tuple[int, list[str]]:
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    done = run_cli(
        args[0],
        srv_url,
        "auth.>",
        *args[1:],
        "--count",
        "1",
        "--timeout",
        "2",
        *options,
        timeout=60,
    )
    return done.returncode, done.stderr.decode().splitlines()


@pytest.mark.parametrize("command", COMMANDS, ids=["tap", "record"])
@pytest.mark.parametrize("seed", [b"SUADGARBAGE\n", b"", b"not a seed at all\n"])
def test_a_malformed_nkey_seed_is_one_line(
    configured,
    tmp_path: Path,  # type: ignore[no-untyped-def]
    command: tuple[str, ...],
    seed: bytes,
) -> None:
    config, _ = nkey_user(tmp_path)
    srv = configured(config)
    bad = tmp_path / "bad.nk"
    bad.write_bytes(seed)
    code, lines = _run(srv.url, command, tmp_path, "--nkey", str(bad))
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"lbparse {command[0]}: --nkey {bad}: not an NKey seed"), lines


@pytest.mark.parametrize("command", COMMANDS, ids=["tap", "record"])
@pytest.mark.parametrize(
    "creds, missing",
    [(b"", "no user JWT"), (None, "no NKey seed"), (b"seedless", "not an NKey seed")],
)
def test_an_empty_or_broken_creds_file_is_one_line(  # type: ignore[no-untyped-def]
    configured,
    tmp_path: Path,
    command: tuple[str, ...],
    creds: bytes | None,
    missing: str,
) -> None:
    config, good = operator_setup(tmp_path)
    srv = configured(config)
    text = good.read_bytes()
    if creds is None:  # the JWT alone
        creds = text[: text.index(b"-----BEGIN USER NKEY SEED")]
    elif creds == b"seedless":  # the seed's line replaced
        lines = text.splitlines(keepends=True)
        at = next(k for k, line in enumerate(lines) if b"BEGIN USER NKEY SEED" in line)
        lines[at + 1] = b"SUxx\n"
        creds = b"".join(lines)
    bad = tmp_path / "bad.creds"
    bad.write_bytes(creds)
    code, lines = _run(srv.url, command, tmp_path, "--creds", str(bad))
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"lbparse {command[0]}: --creds {bad}: {missing}"), lines


def _endless_info(listener: socket.socket, size: int) -> None:
    """Accept one connection and send an INFO line of `size` bytes that never ends."""
    listener.settimeout(30)
    try:
        conn, _ = listener.accept()
    except OSError:
        return
    with conn:
        try:
            conn.sendall(b"INFO {" + b" " * size)
        except OSError:  # the client gave up: what is tested
            pass


@pytest.mark.parametrize("command", COMMANDS, ids=["tap", "record"])
def test_an_info_line_that_never_ends_is_one_line(tmp_path: Path, command: tuple[str, ...]) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        server = threading.Thread(target=_endless_info, args=(listener, 64 << 20))
        server.start()
        try:
            code, lines = _run(f"nats://127.0.0.1:{port}", command, tmp_path)
        finally:
            server.join(timeout=60)
    assert code == 1 and len(lines) == 1, lines
    assert "its first line (a NATS server's INFO) does not end" in lines[0], lines
    assert lines[0].startswith(f"lbparse {command[0]}: cannot connect to nats://127.0.0.1:"), lines
