"""Read a node's metadata Raft log and stable store (DATA/raft/raft.db).

Liftbridge keeps its cluster metadata (streams, partitions, leaders,
ISRs) as a hashicorp/raft log in a bbolt file, through raft-boltdb. This
reads the file directly (no Liftbridge, no lock; a copy of a live or
crashed node's file is fine): every log entry with its index, term and
type, and for Liftbridge's commands the protocol.RaftLog op and its
fields (CreateStream, ShrinkISR, ChangeLeader, ...); cluster
configurations; and the stable store: CurrentTerm, LastVoteTerm,
LastVoteCand. The log entries are decoded by lbparse.raft, the decoder
that also reads the AppendEntries of captured Raft traffic.

PATH is what `lbparse segments` takes: a raft.db file, a node's data
directory holding raft/raft.db, or a folder of data directories (a
cluster's: each node's raft.db, in name order).

Output: a table (default) or `--format jsonl`: first one object with the
file's `stable` store and bbolt `meta`, then one object per log entry.

Every problem (a damaged page, an entry that does not decode, a command
that is not a RaftLog, the --max-raft-db limit reached) is one line on
stderr with the file and position, whatever the format; the table also
marks the entry's row.

The file is mapped, never read whole; what is decoded is copied out of it
within --max-raft-db bytes (the log past it is counted and said).

Exit status: 0 when the whole file was read, 1 when anything was found
(pages or entries that could not be read, entries with warnings, a limit
reached), 2 on usage errors (no such file, no raft.db under a folder, not
a bbolt file).

examples:
  lbparse raft DATA/node1/raft/raft.db
  lbparse raft DATA/node1 --format jsonl | jq 'select(.command) | .command.name'
  lbparse raft DATA --json -o raft.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lbparse.cli.common import add_limit_arguments, limits_from
from lbparse.cli.output import add_format_arguments, add_output_argument
from lbparse.cli.status import UsageError, status_of
from lbparse.codec import jsonform
from lbparse.storage.datadir import RAFT_DB
from lbparse.storage.errors import StorageError
from lbparse.storage.raftdb import read_raft_db
from lbparse.textform import printable

if TYPE_CHECKING:  # lbparse.raft (msgpack) is imported when the command runs
    from lbparse.storage.raftdb import RaftStore, StoredLog

NAME = "raft"
FIELDS_WIDTH = 100


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add `lbparse raft`'s options to its parser.

    Args:
        p: The command's parser.
    """
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="a raft.db file, a data directory with raft/raft.db, or a folder of data directories",
    )
    add_format_arguments(
        p, "table", jsonl="JSON Lines (the stable store, then one entry a line)", table="a table"
    )
    p.add_argument("--from-index", type=int, metavar="N", help="only entries from index N on")
    p.add_argument("--to-index", type=int, metavar="N", help="only entries up to index N")
    add_limit_arguments(p, ("max_raft_db",))
    add_output_argument(p, inputs="paths", what="the entries")


def _db_paths(raw: str) -> list[Path]:
    """The raft.db files PATH names: itself, its data directory's, or those
    of the data directories in it (a cluster's folder, as `segments` takes)."""
    path = Path(raw)
    if path.is_file():
        return [path]
    if path.is_dir():
        if (path / RAFT_DB).is_file():
            return [path / RAFT_DB]
        found = sorted(
            child / RAFT_DB
            for child in path.iterdir()
            if child.is_dir() and (child / RAFT_DB).is_file()
        )
        if found:
            return found
        raise StorageError(
            "bad_file", f"no {RAFT_DB} here, nor in the data directories in it", path=raw
        )
    raise StorageError(
        "bad_file",
        "no such file (a raft.db, a data directory holding "
        f"{RAFT_DB}, or a folder of data directories)",
        path=raw,
    )


def _wanted(log: StoredLog, args: argparse.Namespace) -> bool:
    i = log.index if log.index is not None else -1
    return (args.from_index is None or i >= args.from_index) and (
        args.to_index is None or i <= args.to_index
    )


def run(args: argparse.Namespace) -> int:
    """Run `lbparse raft`: each raft.db's stable store and log entries, as a table or JSON Lines.

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0 ok, 1 if a raft.db had findings (damage, said on
        stderr), 2 if a path holds no raft.db or one cannot be read.

    Raises:
        UsageError: --from-index is past --to-index.
    """
    # A closed pipe (`| head`) is lbparse.cli.main's to handle, as for every command.

    if (
        args.from_index is not None
        and args.to_index is not None
        and args.from_index > args.to_index
    ):
        raise UsageError(
            "bad_option",
            f"--from-index {args.from_index} is past --to-index {args.to_index}: "
            "no entry could be shown",
        )
    stores: list[RaftStore] = []
    limits = limits_from(args)
    for raw in args.paths:
        try:
            stores.extend(read_raft_db(path, limits) for path in _db_paths(raw))
        except StorageError as exc:
            print(f"lbparse raft: {exc}", file=sys.stderr)
            return status_of(exc)
    problems = 0
    for store in stores:
        for f in store.findings:
            print(f.line(), file=sys.stderr)
            problems += 1
        if args.format == "jsonl":
            _jsonl(store, args)
        else:
            _table(store, args)
    return 1 if problems else 0


def _jsonl(store: RaftStore, args: argparse.Namespace) -> None:
    m = store.meta
    # bbolt's txid and page ids are u64 (spec/bbolt.ksy): decimal strings in
    # lbparse's JSON, as the log's indexes and terms (lbparse.codec.jsonform).
    u64 = jsonform.Int64
    head = {
        "file": store.path,
        "stable": store.stable_json(),
        "meta": {
            "page_size": m.page_size,
            "txid": u64(m.txid),
            "root": u64(m.root),
            "freelist": u64(m.freelist),
            "pgid": u64(m.pgid),
        },
    }
    sys.stdout.write(jsonform.dumps(head) + "\n")
    for log in store.logs:
        if _wanted(log, args):
            sys.stdout.write(jsonform.dumps({"file": store.path, **log.to_json_dict()}) + "\n")


def _summary(d: dict[str, Any]) -> str:
    """The entry column: what is wrong with the entry first (a cut row must
    still show it), then what it holds."""
    contents = _contents(d)
    text = "; ".join(
        [f"warning: {w}" for w in d.get("warnings", ())] + ([contents] if contents else [])
    )
    return text if len(text) <= FIELDS_WIDTH else text[: FIELDS_WIDTH - 1] + "…"


def _contents(d: dict[str, Any]) -> str:
    if "command" in d:
        text = f"{d['command']['name'] or d['command']['op']} " + json.dumps(
            d["command"]["fields"], separators=(",", ":")
        )
    elif "configuration" in d:
        text = "servers " + ", ".join(
            f"{s['id']}={s['address']} ({s['suffrage']})" for s in d["configuration"]["servers"]
        )
    elif "error" in d:
        text = "error: " + d["error"]
    else:
        text = ""
    return text


def _table(store: RaftStore, args: argparse.Namespace) -> None:
    st = store.stable_json()
    m = store.meta
    # Paths, server ids and commands' fields are the input's: escaped for the terminal.
    print(
        printable(
            f"== {store.path}  (bbolt page size {m.page_size}, txid {m.txid}, "
            f"{len(store.logs)} log entries)"
        )
    )
    # A key the stable store lacks is "-", as a missing value in every table.
    print(
        printable(
            "  "
            + "  ".join(
                f"{k} {'-' if st.get(k) is None else st[k]}"
                for k in ("CurrentTerm", "LastVoteTerm", "LastVoteCand")
            )
        )
    )
    rows = [("index", "term", "type", "entry")]
    for log in store.logs:
        if not _wanted(log, args):
            continue
        d = log.to_json_dict()
        rows.append(
            (
                str(d.get("index")),
                str(d.get("term", "")),
                printable(str(d.get("type_name", "?"))),
                printable(_summary(d)),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  " + "  ".join(x.ljust(w) for x, w in zip(r[:3], widths)) + "  " + r[3])
    if store.findings:  # the lines themselves are on stderr, in every format
        n = len(store.findings)
        print(f"  {n} problem{'s' if n > 1 else ''} found in this file (listed on stderr)")
