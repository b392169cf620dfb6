"""Read Liftbridge's commit logs on disk: every stored entry of every segment.

PATH is a node's data directory (or a folder of several), its `streams/`,
one stream, one partition, or single `.log`/`.index` files. Entries are
read with Liftbridge's on-disk layout (every generation: the 12-, 20- and
28-byte entry headers, CRC-32 before Feb 2020, CRC-32C since), told apart
from the bytes. Damaged files are read as far as they go: a torn last
entry, a malformed one, garbage or zeros between entries are reported
(stderr, and as error records in JSON Lines) and reading resumes at the
next whole entry.

Output: a readable table per partition (default), or `--format jsonl`:
one object per stored entry with file, stream, partition, segment,
position, node, format, and the entry as `lbparse decode` shows commit-log
messages (offset, timestamp, leader_epoch, size, crc32c, crc_ok, magic,
attributes, key_hex, value_hex, headers_hex).

--verify checks instead of listing: every entry's CRC; offsets contiguous
and increasing across a partition's segments; every index entry pointing
at an entry that is there with its offset, timestamp, position and size,
every entry indexed, nothing but zeros after an index's preallocated zero
tail; timestamps and leader epochs never going backwards and agreeing with
leader-epoch-checkpoint; replication-offset-checkpoint (the high
watermark) not past the last offset; a torn last entry. Given several
nodes' directories, replicas of a partition must be identical up to the
smallest high watermark; the first offset that differs is named. Each
finding is one line: FILE:POSITION: KIND: what was found.

Exit status: 0 when everything was read whole (with --verify: every check
holds), 1 when something was found, or when nothing matched --stream,
--partition or the offsets (said on stderr), 2 on usage errors (a path
that does not exist or holds no partition, a negative partition, an
offset range that is empty).

examples:
  lbparse segments DATA/node1
  lbparse segments DATA/node1/streams/orders --partition 0 \\
      --from-offset 10 --to-offset 20
  lbparse segments DATA --format jsonl --deep | jq .value_decoded
  lbparse segments --verify DATA/node1 DATA/node2 DATA/node3
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from lbparse.cli import output
from lbparse.cli.output import add_format_arguments, add_output_argument
from lbparse.cli.status import DATA, UsageError, status_of, warn
from lbparse.codec import jsonform
from lbparse.codec.commitlog import ENTRY_INT64, CommitLogEntry
from lbparse.storage import segment
from lbparse.storage.datadir import PartitionDir, find_partitions, unreadable_files
from lbparse.storage.errors import Finding, StorageError
from lbparse.storage.formats import CURRENT
from lbparse.storage.segment import SegmentReading, entry_json, iter_segment
from lbparse.storage.values import decode_value
from lbparse.storage.verify import PartitionCheck, check_partition, compare_replicas
from lbparse.textform import printable

NAME = "segments"
VALUE_WIDTH = 40


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add `lbparse segments`'s options to its parser.

    Args:
        p: The command's parser.
    """
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="data directory, streams/, a stream, a partition, or .log/.index files",
    )
    add_format_arguments(
        p, "table", jsonl="one JSON object per entry", table="an aligned table per partition"
    )
    p.add_argument(
        "--stream", action="append", metavar="NAME", help="only this stream (repeatable)"
    )
    p.add_argument(
        "--partition",
        action="append",
        type=_partition,
        metavar="N",
        help="only this partition number (repeatable)",
    )
    p.add_argument("--from-offset", type=int, metavar="N", help="only entries from offset N on")
    p.add_argument("--to-offset", type=int, metavar="N", help="only entries up to offset N")
    p.add_argument(
        "--deep",
        action="store_true",
        help="decode values of known type: __activity (proto.ActivityStreamEvent), "
        "__cursors (protocol.Cursor), values that are envelopes",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="check the files (see above) and print one line per finding",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no entries or findings on stdout; with --verify only the exit status",
    )
    add_output_argument(p, inputs="paths", what="the entries (or findings)")


def _partition(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"partitions are numbered from 0: not {text!r}")
    return number


def _selected(parts: list[PartitionDir], args: argparse.Namespace) -> list[PartitionDir]:
    return [
        p
        for p in parts
        if (not args.stream or p.stream in args.stream)
        and (not args.partition or p.partition in args.partition)
    ]


def _nothing_selected(found: list[PartitionDir], args: argparse.Namespace) -> str:
    """What the empty selection was, and what there is instead."""
    asked = " ".join(
        [
            *(f"--stream {s}" for s in args.stream or ()),
            *(f"--partition {n}" for n in args.partition or ()),
        ]
    )
    there = sorted({f"{p.stream}/{p.partition}" for p in found})
    shown = ", ".join(there[:10]) + (f" and {len(there) - 10} more" if len(there) > 10 else "")
    return f"no partition matches {asked} (found: {shown})"


def run(args: argparse.Namespace) -> int:
    """Run `lbparse segments`: list the partitions' entries, or --verify them.

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0 ok, 1 if a file is unreadable or damaged (or
        --verify finds anything), or nothing matches the selection (no
        partition, no entry in the offset range), 2 if the paths hold no
        partition or cannot be read.

    Raises:
        UsageError: --from-offset is past --to-offset.
    """
    # A closed pipe (`| head`) is lbparse.cli.main's to handle, as for every command.
    if (
        args.from_offset is not None
        and args.to_offset is not None
        and args.from_offset > args.to_offset
    ):
        raise UsageError(
            "bad_option",
            f"--from-offset {args.from_offset} is past --to-offset "
            f"{args.to_offset}: no entry could be shown",
        )
    try:
        found = find_partitions(args.paths)
    except StorageError as exc:
        print(f"lbparse segments: {exc}", file=sys.stderr)
        return status_of(exc)
    parts = _selected(found, args)
    if found and not parts:
        warn(NAME, _nothing_selected(found, args))
        return DATA
    if args.verify:
        return _verify(parts, args)
    return _list(parts, args)


# --- listing ---------------------------------------------------------------


def _in_range(entry: CommitLogEntry, args: argparse.Namespace) -> bool:
    return (args.from_offset is None or entry.offset >= args.from_offset) and (
        args.to_offset is None or entry.offset <= args.to_offset
    )


def _readings(
    part: PartitionDir, args: argparse.Namespace, unreadable: Callable[[Finding], None]
) -> Iterator[tuple[int, int, SegmentReading]]:
    """(base offset, part number, part) of the segments that can hold entries in
    the offset range, each read as a stream (a part at a time)."""
    segs = [s for s in part.segments if s.log is not None]
    for i, seg in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else None
        if args.from_offset is not None and nxt is not None and nxt <= args.from_offset:
            continue
        if args.to_offset is not None and seg.base_offset > args.to_offset:
            break
        assert seg.log is not None
        try:
            for n, reading in enumerate(iter_segment(seg.log)):
                yield seg.base_offset, n, reading
        except StorageError as exc:  # this file only: one line, the others are read
            unreadable(Finding(str(seg.log), exc.position, "bad_file", exc.detail))


def _list(parts: list[PartitionDir], args: argparse.Namespace) -> int:
    out = sys.stdout
    problems = 0
    ranged = args.from_offset is not None or args.to_offset is not None
    in_range = 0  # entries in the offset range, when one is given
    for part in parts:
        shown = False
        for f in unreadable_files(part):
            problems += 1
            print(printable(f.line()), file=sys.stderr)

        def unreadable(f: Finding) -> None:
            nonlocal problems, shown
            problems += 1
            shown = True  # it has a segment, unread: not "(no segments)"
            print(printable(f.line()), file=sys.stderr)

        for base, n, reading in _readings(part, args, unreadable):
            for f in reading.damage:
                problems += 1
                print(printable(f.line()), file=sys.stderr)
            if ranged:
                in_range += sum(1 for _, e in reading if _in_range(e, args))
            if args.quiet:
                continue
            if args.format == "jsonl":
                _jsonl(out, part, base, reading, args)
            else:
                _table(out, part, base, reading, args, shown, n == 0)
                shown = True
        if not shown and not args.quiet and args.format == "table":
            out.write(
                printable(f"== {part.node} {part.stream}/{part.partition}  (no segments)") + "\n"
            )
    if ranged and not in_range:
        span = (
            f"{'' if args.from_offset is None else args.from_offset}.."
            f"{'' if args.to_offset is None else args.to_offset}"
        )
        warn(NAME, f"no entry in offsets {span} in the {len(parts)} partition(s) read")
        return DATA
    return 1 if problems else 0


def _base_record(part: PartitionDir, base: int, reading: SegmentReading) -> dict[str, Any]:
    # The segment's base offset is a 64-bit offset: a decimal string (lbparse.codec.jsonform).
    return {
        "node": part.node,
        "file": reading.path,
        "stream": part.stream,
        "partition": part.partition,
        "segment": jsonform.Int64(base),
        "format": reading.format.name,
    }


def _jsonl(
    out: TextIO, part: PartitionDir, base: int, reading: SegmentReading, args: argparse.Namespace
) -> None:
    head = _base_record(part, base, reading)
    if _native_jsonl(out, head, reading, args):
        return
    rows: list[tuple[int, dict[str, Any]]] = []
    for pos, e in reading:
        if not _in_range(e, args):
            continue
        rec = {**head, "position": pos, **entry_json(e, reading.format)}
        if args.deep:
            rec["value_decoded"] = _deep(part.stream, e.value)
        rows.append((pos, rec))
    for f in reading.damage:
        rec = {**head, "position": f.position, "error": f.kind, "message": f.message}
        if f.position is not None:
            rec.update(
                {
                    k: jsonform.Int64(v) if k in ENTRY_INT64 else v
                    for k, v in reading.damaged_headers.get(f.position, {}).items()
                }
            )
        rows.append((f.position or 0, rec))
    rows.sort(key=lambda r: r[0])
    write = out.write
    for _, rec in rows:
        write(jsonform.dumps(rec) + "\n")


def _native_jsonl(
    out: TextIO, head: dict[str, Any], reading: SegmentReading, args: argparse.Namespace
) -> bool:
    """The lines written by the C formatter (when built): whole entries of a
    generation that stores every field, nothing to decode. False: not done."""
    fmt = reading.format
    if (
        segment._native is None
        or args.deep
        or reading.damage
        or fmt.field_index("leader_epoch") is None
        or fmt.field_index("timestamp") is None
    ):
        return False
    positions, entries = reading.positions, reading.entries
    if args.from_offset is not None or args.to_offset is not None:
        keep = [i for i, e in enumerate(entries) if _in_range(e, args)]
        positions, entries = [positions[i] for i in keep], [entries[i] for i in keep]
    prefix = (jsonform.dumps(head)[:-1] + ", ").encode()
    out.flush()
    out.buffer.write(segment._native.jsonl(prefix, positions, entries))
    return True


def _deep(stream: str, value: bytes | None) -> dict[str, Any] | None:
    return decode_value(stream, value)


def rfc3339(ns: int | None) -> str:
    """Unix nanoseconds as an RFC 3339 UTC time; "-" for none.

    Args:
        ns: Integer nanoseconds since the Unix epoch, or None.

    Returns:
        The text (output.rfc3339), or "-".
    """
    return "-" if ns is None else output.rfc3339(int(ns))


def _text(data: bytes | None, width: int = VALUE_WIDTH) -> str:
    if data is None:
        return "(nil)"
    try:
        s = data.decode("utf-8")
        if not s.isprintable():
            raise ValueError
    except ValueError:
        s = "0x" + data.hex()
    return s if len(s) <= width else s[: width - 1] + "…"


def _table(
    out: TextIO,
    part: PartitionDir,
    base: int,
    reading: SegmentReading,
    args: argparse.Namespace,
    after: bool,
    head: bool,
) -> None:
    fmt = reading.format
    note = "" if fmt is CURRENT else f", format {fmt.name}"
    if head:
        out.write(
            ("\n" if after else "")
            + printable(
                f"== {part.node} {part.stream}/{part.partition}  "
                f"segment {base} ({reading.size:,} bytes{note})"
            )
            + "\n"
        )
    cols = ("position", "offset", "timestamp", "epoch", "size", "crc", "key", "value", "headers")
    rows: list[tuple[str, ...]] = []
    for pos, e in reading:
        if not _in_range(e, args):
            continue
        d = entry_json(e, fmt)
        value = _text(e.value)
        if args.deep:
            dec = _deep(part.stream, e.value)
            if dec is not None:
                value = jsonform.dumps(dec.get("json", dec.get("error")))
                value = value if len(value) <= 80 else value[:79] + "…"
        rows.append(
            (
                str(pos),
                str(e.offset),
                rfc3339(d["timestamp"]),
                "-" if d["leader_epoch"] is None else str(d["leader_epoch"]),
                str(e.size),
                "ok" if e.crc_ok else "BAD",
                _text(e.key, 16),
                value,
                " ".join(f"{k}={_text(v, 24)}" for k, v in e.headers),
            )
        )
    # Header keys and --deep values are the input's: escaped before they are measured.
    rows = [tuple(printable(c) for c in r) for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]

    def line(r: tuple[str, ...]) -> str:
        return "  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip()

    if head:
        out.write("  " + line(cols) + "\n")
    for r in rows:
        out.write("  " + line(r) + "\n")


# --- verify ----------------------------------------------------------------


def _verify(parts: list[PartitionDir], args: argparse.Namespace) -> int:
    checks: list[PartitionCheck] = []
    nodes = {p.node for p in parts}
    keep = len(nodes) > 1
    total_entries = 0
    findings: list[Finding] = []
    for i, part in enumerate(parts, 1):
        if sys.stderr.isatty():
            sys.stderr.write(
                f"\r\033[Kchecking {i}/{len(parts)} {part.node} {part.stream}/{part.partition}"
            )
            sys.stderr.flush()
        check = check_partition(part, keep_digests=keep)
        total_entries += check.entries
        findings.extend(check.findings)
        checks.append(check)
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K")
    findings.extend(compare_replicas(checks))
    # File by file, in byte order (a file's counted remainder, position None, last).
    findings.sort(key=lambda f: (f.path, f.position is None, f.position or 0))
    if not args.quiet:
        for f in findings:
            if args.format == "jsonl":
                sys.stdout.write(jsonform.dumps(f.to_json_dict()) + "\n")
            else:
                sys.stdout.write(printable(f.line()) + "\n")
    replicas = ", replicas compared across " + ", ".join(sorted(nodes)) if keep else ""
    print(
        f"verified {len(parts)} partition(s), {total_entries:,} entries{replicas}: "
        f"{len(findings)} finding(s)",
        file=sys.stderr,
    )
    return 1 if findings else 0
