"""NATS decentralized auth for tests: nkeys made with the `nkeys` package, and
the operator, account and user JWTs a nats-server's MEMORY resolver trusts,
signed here (v2 claims, `ed25519-nkey`), written as a .creds file the way
`nsc` writes one. Only what a test server needs; not a general tool."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
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
