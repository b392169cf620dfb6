"""Decode envelopes and print one JSON object per input.

Inputs are hex strings or files of raw bytes (`-` or nothing: stdin). With
--hex or --base64 the files (or stdin) hold one envelope per line. Each
result is the envelope's JSON (the shape of the reference vectors, with
`layout`), or {"error": KIND, "message": ...}. A line that is not hex (or
base64) is reported on stderr with its file and line number, and the run
goes on.

Exit status: 0 when every input decoded, 1 when one did not (or a line
was bad), 2 when an argument is neither a file nor hex, or a file cannot
be opened.

examples:
  lbparse decode b90e43b40008000a0a027331         # a ServerInfoRequest
  lbparse decode --hex envelopes.txt --pretty
  cat msg.bin | lbparse decode --layout legacy
"""

from __future__ import annotations

import argparse
from typing import Any

from lbparse.cli.common import add_layout_argument, add_limit_arguments, limits_from
from lbparse.cli.inputs import add_input_arguments, read_inputs
from lbparse.cli.output import add_output_argument, print_json
from lbparse.cli.status import OK, status_of, warn
from lbparse.codec import jsonform
from lbparse.codec.api import decode
from lbparse.codec.envelope import Envelope
from lbparse.errors import EnvelopeError
from lbparse.textform import msg_type_word

NAME = "decode"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add `lbparse decode`'s options to its parser.

    Args:
        p: The command's parser.
    """
    add_input_arguments(p)
    add_layout_argument(p)
    p.add_argument(
        "--payload-type",
        help="payload type for layouts whose header does not name "
        "it (e.g. proto.Ack for a legacy ack)",
    )
    p.add_argument(
        "--lenient",
        action="store_true",
        help="accept what the upstream server accepts, with warnings",
    )
    p.add_argument(
        "--no-verify-crc", dest="verify_crc", action="store_false", help="do not check the CRC-32C"
    )
    p.add_argument("--pretty", action="store_true", help="aligned human-readable view")
    add_output_argument(p, inputs="inputs")
    add_limit_arguments(p, ("max_payload", "max_depth"))


def pretty(env: Envelope | None, err: EnvelopeError | None, where: str) -> str:
    """The `--pretty` view of one input: its header fields and payload, aligned.

    Args:
        env: The decoded envelope, or None if it did not decode.
        err: Why it did not decode, or None.
        where: Where the input came from (its heading).

    Returns:
        The view's lines, joined.
    """
    lines = [f"== {where}"]
    if err is not None:
        lines.append(f"  error         {err.kind}: {err.message}")
        return "\n".join(lines)
    assert env is not None
    d = env.to_json_dict()
    rows: list[tuple[str, Any]] = [("layout", env.layout)]
    if env.version is not None:
        flags = f"0x{env.flags:02x}" + (" (crc)" if env.flags and env.flags & 1 else "")
        rows += [("version", env.version), ("header_len", env.header_len), ("flags", flags)]
        rows.append(("crc32c", "none" if env.crc32c is None else f"0x{env.crc32c:08x} (ok)"))
        name = msg_type_word(env.msg_type_name)
        mt = name if env.msg_type is None else f"{env.msg_type} {name}"
        rows.append(("msg_type", mt))
    rows.append(("payload_type", f"{env.payload_type} ({len(env.payload)} bytes)"))
    for key in ("ambiguous", "layout_candidates", "payload_type_candidates", "reasons", "warnings"):
        if d.get(key):
            rows.append((key, d[key]))
    lines += [f"  {k:<13} {v}" for k, v in rows]
    body = jsonform.dumps(d.get("payload_json"), indent=2)
    lines.append("  payload       " + body.replace("\n", "\n                "))
    for i, entry in enumerate(d.get("commitlog_messages", [])):
        lines.append(f"  entry {i:<7} {jsonform.dumps(entry)}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run `lbparse decode`: each input's envelope as JSON (or --pretty).

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0 ok, 1 if an envelope did not decode (or a line was
        bad), 2 for an input that cannot be read.
    """
    status = OK
    limits = limits_from(args)
    for item in read_inputs(args.inputs, args.mode):
        if item.problem is not None:
            warn(NAME, item.problem)
            status = max(status, item.status)
            continue
        env: Envelope | None = None
        err: EnvelopeError | None = None
        try:
            env = decode(
                item.data,
                args.layout,
                verify_crc=args.verify_crc,
                lenient=args.lenient,
                payload_type=args.payload_type,
                limits=limits,
            )
        except EnvelopeError as exc:
            err = exc
            status = max(status, status_of(exc))
        if args.pretty:
            print(pretty(env, err, item.where))
        elif env is not None:
            print_json(env.to_json_dict())
        elif err is not None:
            print_json(err.to_json_dict())
    return status
