"""Decode the example envelopes that ship with lbparse and print a table per MsgType.

The examples (lbparse/examples/envelopes.hex) cover publishes, acks and
server-to-server RPCs, with and without CRC-32C, and one corrupt envelope.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from importlib import resources
from typing import Any

from lbparse.api import decode
from lbparse.errors import EnvelopeError

NAME = "demo"
HELP = "decode the bundled example envelopes"
MAX_COLUMNS = 5
MAX_WIDTH = 24


def example_lines() -> list[str]:
    text = resources.files("lbparse.examples").joinpath("envelopes.hex").read_text()
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def add_arguments(p: argparse.ArgumentParser) -> None:
    del p  # no options


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= MAX_WIDTH else text[: MAX_WIDTH - 1] + "…"


def print_table(title: str, rows: list[dict[str, Any]]) -> None:
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    columns = columns[:MAX_COLUMNS]
    cells = [[_cell(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(title)
    print("  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for r in cells:
        print("  " + "  ".join(v.ljust(w) for v, w in zip(r, widths)))
    print()


def run(args: argparse.Namespace) -> int:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    errors = []
    lines = example_lines()
    for i, line in enumerate(lines, 1):
        try:
            env = decode(bytes.fromhex(line))
        except EnvelopeError as exc:
            errors.append((i, exc))
            continue
        crc = "none" if env.crc32c is None else f"{env.crc32c:08x}"
        row = {"#": i, "crc32c": crc, **env.to_json_dict()["payload_json"]}
        groups[f"MsgType {env.msg_type} {env.msg_type_name} ({env.payload_type})"].append(row)
    print(f"Decoded {len(lines)} example envelopes: {len(lines) - len(errors)} ok, "
          f"{len(errors)} rejected\n")
    for title in sorted(groups, key=lambda t: int(t.split()[1])):
        print_table(title, groups[title])
    for i, exc in errors:
        print(f"#{i} rejected: {exc.kind}: {exc.message}")
    return 0
