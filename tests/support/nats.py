"""NATS for tests: nats-server's decentralized auth, and a capture's NATS
messages found without lbparse.

Decentralized auth: nkeys made with the `nkeys` package, and the operator,
account and user JWTs a nats-server's MEMORY resolver trusts, signed here
(v2 claims, `ed25519-nkey`), written as a .creds file the way `nsc` writes
one. Only what a test server needs; not a general tool. (The server
itself: the `nats_server` fixture of tests/conftest.py, support/net.py.)
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nkeys


def new_key(prefix: int) -> Any:
    """A fresh key pair of the given role (nkeys.PREFIX_BYTE_USER, ...)."""
    return nkeys.from_seed(nkeys.encode_seed(os.urandom(32), prefix))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def jwt(claims: dict[str, Any], issuer: Any) -> str:
    """Claims signed by `issuer` (a key pair), as a NATS v2 JWT."""
    claims = {**claims, "iat": int(time.time()), "iss": issuer.public_key.decode()}
    body = json.dumps(claims, separators=(",", ":"), sort_keys=True).encode()
    claims["jti"] = base64.b32encode(hashlib.sha512(body).digest()[:32]).decode().rstrip("=")
    head = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    return f"{head}.{payload}.{_b64(issuer.sign(f'{head}.{payload}'.encode()))}"


UNLIMITED = {"subs": -1, "data": -1, "payload": -1}


def operator_setup(directory: Path) -> tuple[str, Path]:
    """A trust chain: (the server config's lines, the user's .creds file)."""
    op = new_key(nkeys.PREFIX_BYTE_OPERATOR)
    acc = new_key(nkeys.PREFIX_BYTE_ACCOUNT)
    user = new_key(nkeys.PREFIX_BYTE_USER)
    op_jwt = jwt(
        {
            "sub": op.public_key.decode(),
            "name": "lbparse-test-operator",
            "nats": {"type": "operator", "version": 2},
        },
        op,
    )
    acc_jwt = jwt(
        {
            "sub": acc.public_key.decode(),
            "name": "lbparse-test-account",
            "nats": {
                "type": "account",
                "version": 2,
                "limits": {
                    **UNLIMITED,
                    "imports": -1,
                    "exports": -1,
                    "wildcards": True,
                    "conn": -1,
                    "leaf": -1,
                },
            },
        },
        op,
    )
    user_jwt = jwt(
        {
            "sub": user.public_key.decode(),
            "name": "lbparse-test-user",
            "nats": {"type": "user", "version": 2, "pub": {}, "sub": {}, **UNLIMITED},
        },
        acc,
    )
    (directory / "operator.jwt").write_text(op_jwt)
    creds = directory / "user.creds"
    creds.write_text(
        "-----BEGIN NATS USER JWT-----\n" + user_jwt + "\n------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        + user.seed.decode()
        + "\n------END USER NKEY SEED------\n"
    )
    config = (
        f'operator: "{directory / "operator.jwt"}"\nresolver: MEMORY\n'
        f'resolver_preload: {{\n  {acc.public_key.decode()}: "{acc_jwt}"\n}}\n'
    )
    return config, creds


def nkey_user(directory: Path) -> tuple[str, Path]:
    """A user known by its nkey: (the server config's lines, the seed file)."""
    user = new_key(nkeys.PREFIX_BYTE_USER)
    seed = directory / "user.nk"
    seed.write_text(user.seed.decode() + "\n")
    return f'authorization {{\n  users = [ {{ nkey: "{user.public_key.decode()}" }} ]\n}}\n', seed


# ----------------------------------------------------------------------
# NATS messages of a capture found without lbparse: tshark's TCP segments, framed here.
#
# tshark gives every TCP segment's payload and raw sequence number; each
# direction of each connection is put together by sequence number here, and
# cut into NATS operations by the protocol's own rule (a control line ending
# in CRLF; PUB/HPUB/MSG/HMSG followed by the byte count their last argument
# gives, and CRLF). Nothing of lbparse's capture code is used, so the
# messages it finds are a check on lbparse's reassembly and parsing.

WITH_PAYLOAD = {b"PUB", b"HPUB", b"MSG", b"HMSG"}


@dataclass(frozen=True)
class Message:
    src: str
    dst: str
    verb: str
    subject: str
    data: bytes  # header block and payload, as on the wire


def tcp_streams(capture: Path) -> dict[tuple[str, str], bytes]:
    """(src, dst) as host:port -> the bytes that direction carried."""
    res = subprocess.run(
        [
            "tshark",
            "-r",
            str(capture),
            "-n",
            "-o",
            "tcp.desegment_tcp_streams:FALSE",
            "-Y",
            "tcp.len > 0",
            "-T",
            "fields",
            "-E",
            "separator=\t",
            "-e",
            "ip.src",
            "-e",
            "tcp.srcport",
            "-e",
            "ip.dst",
            "-e",
            "tcp.dstport",
            "-e",
            "tcp.seq_raw",
            "-e",
            "tcp.payload",
        ],
        capture_output=True,
        timeout=600,
        check=True,
    )
    segments: dict[tuple[str, str], dict[int, bytes]] = defaultdict(dict)
    for line in res.stdout.decode().splitlines():
        src, sport, dst, dport, seq, payload = line.split("\t")
        data = bytes.fromhex(payload.replace(":", ""))
        seg = segments[(f"{src}:{sport}", f"{dst}:{dport}")]
        if len(data) > len(seg.get(int(seq), b"")):
            seg[int(seq)] = data  # a retransmission keeps the longer copy
    out = {}
    for key, seg in segments.items():
        buf = bytearray()
        first = min(seg)
        for seq in sorted(seg):
            at = (seq - first) % (1 << 32)
            data = seg[seq]
            if at + len(data) > len(buf):
                buf += data[max(len(buf) - at, 0) :]
        out[key] = bytes(buf)
    return out


def messages(capture: Path) -> list[Message]:
    """Every PUB, HPUB, MSG and HMSG of the capture, per direction in order."""
    out = []
    for (src, dst), data in tcp_streams(capture).items():
        pos = 0
        while True:
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                break
            args = data[pos:eol].split()
            pos = eol + 2
            if not args or args[0].upper() not in WITH_PAYLOAD:
                continue
            size = int(args[-1])
            out.append(
                Message(
                    src, dst, args[0].upper().decode(), args[1].decode(), data[pos : pos + size]
                )
            )
            pos += size + 2
    return out
