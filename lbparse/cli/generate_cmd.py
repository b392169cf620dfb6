"""Generate the spec for another language into one self-contained folder.

Compiles spec/*.ksy with kaitai-struct-compiler 0.11 (needs Node and
`make install-node`) and writes beside the code the protobuf schemas
(proto/*.proto), their descriptor set (proto/lbparse.desc) and the layouts
and MsgType tables as JSON (msg_types.json). `--lang wireshark` writes a
Lua dissector for NATS and the Liftbridge envelope (`tshark -X
lua_script:DIR/liftbridge.lua`). Several languages, or `all`, give one
sub-folder per language.

examples:
  lbparse generate --lang javascript -o out/js
  lbparse generate --lang wireshark -o ~/.local/lib/wireshark/plugins
  lbparse generate --lang all -o out
"""

from __future__ import annotations

import argparse
import sys

from lbparse.cli.status import status_of
from lbparse.codegen import LANGUAGES, CodegenError, generate, resolve_languages
from lbparse.outputs import check_dir

NAME = "generate"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add `lbparse generate`'s options to its parser.

    Args:
        p: The command's parser.
    """
    p.add_argument(
        "--lang",
        "-l",
        action="append",
        required=True,
        metavar="LANG",
        help=f"target, repeatable or comma-separated: {', '.join(LANGUAGES)}, all",
    )
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write")
    p.add_argument("--nest", action="store_true", help="put even a single language in DIR/LANG")


def run(args: argparse.Namespace) -> int:
    """Run `lbparse generate`: parsers, schemas and a dissector for the languages asked for.

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0 ok, 1 if generating failed (said on stderr).
    """
    langs = resolve_languages(args.lang)
    check_dir(args.output, "-o")  # a file, a device, another user's link: refused before any work
    try:
        result = generate(langs, args.output, nest=True if args.nest else None)
    except CodegenError as exc:
        print(f"lbparse generate: {exc}", file=sys.stderr)
        return status_of(exc)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for lang in langs:
        print(f"{lang}: {result.folders[lang]} ({len(result.files[lang])} files)")
    return 0
