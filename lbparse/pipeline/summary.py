"""What a run read and wrote: per input file, and in total.

Each task counts what it reads (`sources.UnitStats`) and what the decoder
makes of it (`count_batch`), and returns the counts of each unit as a row of
its result, beside the list of files it wrote: Spark hands the driver the
result of one successful attempt per task, so nothing is counted twice. The
driver folds the units into one line per file (`Summary`), prints it
(`table`) and writes it as summary.json.

The counts add up, and `checks()` says where they would not: for every
file, rows = messages + problems, and the rows split by layout, by MsgType
and by error kind each sum to the rows ("(none)" counts rows without a
layout, MsgType or error: a key of the summary's counts, never a value in
the data, where such a row's msg_type_name is null); the totals are the
sums of the files; and the rows in the Parquet files written (messages
and entries: one row per input row) are the rows counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow.compute as pc

from lbparse.columnar.units import input_problems
from lbparse.textform import NO_MSG_TYPE, printable

__all__ = [
    "NONE",
    "FileSummary",
    "Summary",
    "count_batch",
    "count_entries",
    "count_entry_problems",
    "count_problems",
]

NONE = NO_MSG_TYPE  # the breakdowns' key for rows without a layout, MsgType or error
BREAKDOWNS = (
    ("per_layout", "layout"),
    ("per_msg_type", "msg_type_name"),
    ("per_error_kind", "error_kind"),
)


def count_batch(batch: Any, counts: dict[str, Counter[str]]) -> None:
    """Add a decoded batch's rows to the per-layout, per-MsgType and per-error counts.

    A null value is counted under NONE ("(none)").

    Args:
        batch: A decoded Arrow record batch (the messages rows: layout,
            msg_type_name and error_kind columns).
        counts: The unit's counts, updated in place: "per_layout",
            "per_msg_type" and "per_error_kind", each a Counter by value (made
            if absent).
    """
    for key, column in BREAKDOWNS:
        col = batch.column(column)
        c = counts.setdefault(key, Counter())
        if col.null_count:
            c[NONE] += col.null_count
        if col.null_count < len(col):
            vc = pc.value_counts(col.drop_null())
            for value, n in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()):
                c[value] += n


def count_entries(batch: Any, counts: dict[str, Counter[str]]) -> None:
    """A batch of stored entries (pipeline/datadir_entries.py): per stream and error kind.

    Entries have no layout or MsgType: those breakdowns count them as "(none)",
    so that every breakdown still sums to the rows.

    Args:
        batch: An Arrow record batch of the entries table (error_kind and
            stream columns).
        counts: The unit's counts, updated in place: "per_layout",
            "per_msg_type", "per_error_kind" and "per_stream" Counters (made if
            absent).
    """
    n = batch.num_rows
    for key in ("per_layout", "per_msg_type"):
        counts.setdefault(key, Counter())[NONE] += n
    for key, column in (("per_error_kind", "error_kind"), ("per_stream", "stream")):
        col = batch.column(column)
        c = counts.setdefault(key, Counter())
        if col.null_count:
            c[NONE] += col.null_count
        if col.null_count < len(col):
            vc = pc.value_counts(col.drop_null())
            for value, k in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()):
                c[value] += k


def count_entry_problems(batch: Any) -> int:
    """Rows about damage in a segment rather than a stored entry.

    Args:
        batch: An Arrow record batch of the entries table.

    Returns:
        How many of its rows have an error kind.
    """
    kinds = batch.column("error_kind")
    return int(len(kinds) - kinds.null_count)


def count_problems(batch: Any) -> int:
    """Rows about the input rather than a message (error kind `input:...`).

    Args:
        batch: A decoded Arrow record batch of messages rows.

    Returns:
        How many of its rows are about the input.
    """
    kinds = batch.column("error_kind")
    if kinds.null_count == len(kinds):
        return 0
    return pc.sum(input_problems(kinds)).as_py() or 0


@dataclass
class FileSummary:
    """One input file: what was read, what came out.

    Attributes:
        path: The file's path.
        format: Its format (pcap, pcapng, jsonl, parquet, segment, ...).
        size: Its size in bytes.
        bytes_read: Bytes read of it.
        packets: Packets read (captures).
        messages: NATS messages (for a table: its rows; for a segment: its
            entries).
        problems: Rows about the input itself (gaps, unreadable parts).
        rows: Rows written for it: messages + problems.
        gaps: Gaps in the capture.
        gap_bytes: Bytes missing in those gaps.
        notices: Problems the capture reader noticed, by kind.
        notes: Normal behaviour the reader noticed (a cancelled call...), by
            kind: not problems.
        per_layout: Rows by header layout ("(none)": none).
        per_msg_type: Rows by MsgType name ("(none)": none).
        per_error_kind: Rows by error kind ("(none)": no error).
        per_stream: Stored entries by stream (segments).
        file_errors: Why reading stopped early, "input:KIND: message", per
            unit that stopped.
        decoded_by: Where the tasks' lbparse was (a cluster's executors may
            differ), each once.
        units: The units of the file counted.
        units_missing: Units whose counts never came back (a bug if ever > 0).
        read_seconds: Seconds the tasks spent reading the input,
        decode_seconds: decoding it,
        write_seconds: and writing Parquet (the rest is Spark's).
        peak_rss_mb: The largest Python worker that read it, in MB.
    """

    path: str
    format: str
    size: int
    bytes_read: int = 0
    packets: int = 0
    messages: int = 0  # NATS messages (for a table: its rows)
    problems: int = 0  # rows about the input itself (gaps, unreadable parts)
    rows: int = 0
    gaps: int = 0
    gap_bytes: int = 0
    notices: dict[str, int] = field(default_factory=dict)
    notes: dict[str, int] = field(default_factory=dict)  # normal behaviour, not problems
    per_layout: dict[str, int] = field(default_factory=dict)
    per_msg_type: dict[str, int] = field(default_factory=dict)
    per_error_kind: dict[str, int] = field(default_factory=dict)
    per_stream: dict[str, int] = field(default_factory=dict)  # stored entries (segments)
    file_errors: list[str] = field(default_factory=list)
    decoded_by: list[str] = field(default_factory=list)  # where the tasks' lbparse was
    units: int = 0
    units_missing: int = 0  # units whose counts never came back (a bug if ever > 0)
    read_seconds: float = 0.0  # in the tasks: reading the input,
    decode_seconds: float = 0.0  # decoding it,
    write_seconds: float = 0.0  # and writing Parquet (the rest is Spark's)
    peak_rss_mb: float = 0.0  # the largest Python worker that read it

    def add_unit(self, u: dict[str, Any]) -> None:
        """Add one unit's counts (a task's result row) to the file's.

        Args:
            u: The unit's counts as the task returned them (tasks.new_counts()'s
                keys, with file_error, lbparse and peak_rss_mb where known).
        """
        self.units += 1
        for name in (
            "bytes_read",
            "packets",
            "messages",
            "problems",
            "rows",
            "gaps",
            "gap_bytes",
            "read_seconds",
            "decode_seconds",
            "write_seconds",
        ):
            setattr(self, name, getattr(self, name) + u.get(name, 0))
        for name in (
            "notices",
            "notes",
            "per_layout",
            "per_msg_type",
            "per_error_kind",
            "per_stream",
        ):
            mine = Counter(getattr(self, name))
            mine.update(u.get(name, {}))
            setattr(self, name, dict(mine))
        self.peak_rss_mb = max(self.peak_rss_mb, u.get("peak_rss_mb", 0.0))
        if u.get("file_error"):
            self.file_errors.append(u["file_error"])
        if u.get("lbparse") and u["lbparse"] not in self.decoded_by:
            self.decoded_by.append(u["lbparse"])


@dataclass
class Summary:
    """The whole run: files, totals, breakdowns, and where the data went.

    Attributes:
        files: One FileSummary per input file, in the order planned.
        output: Where the messages table was written (DIR/messages).
        layout: The --layout the run decoded with.
        seconds: How long the run took.
        rows_written: Rows in the Parquet files of messages and entries (None:
            not known).
        files_written: Parquet files written.
        error: Why the job failed (then nothing was written); None when it
            finished.
        tables: The tables this run wrote, by name (messages, proto_Message,
            ..., entries): each one's path and rows; only those with rows.
        skipped: What the inputs' directories held and the run did not read,
            and why (pipeline.input_plan.plan): [{"path": ..., "reason": ...}].
    """

    files: list[FileSummary]
    output: str
    layout: str
    seconds: float = 0.0
    rows_written: int | None = None  # rows in the Parquet files (None: not known)
    files_written: int = 0
    error: str | None = None  # why the job failed (then nothing was written)
    # The tables this run wrote, by name (messages, proto_Message, ..., entries):
    # each one's path and rows; only those with rows.
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    # What the inputs' directories held and the run did not read, and why
    # (pipeline.input_plan.plan): [{"path": ..., "reason": ...}].
    skipped: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def failed(
        cls, units: Iterable[Any], output: str, layout: str, seconds: float, error: str
    ) -> Summary:
        """A run that did not finish: the inputs it planned, nothing read.

        Args:
            units: The planned units (each file once, however many units it has).
            output: Where the messages table would have been.
            layout: The --layout of the run.
            seconds: How long it ran.
            error: Why the job failed, one line.

        Returns:
            A summary whose outcome is "failed".
        """
        files: dict[str, FileSummary] = {}
        for unit in units:
            if unit.path not in files:
                files[unit.path] = FileSummary(unit.path, unit.format, unit.size)
        return cls(list(files.values()), output, layout, seconds, 0, 0, error)

    @property
    def outcome(self) -> str:
        """How the run ended: "failed", "problems" or "ok".

        "failed": the job did not finish (a crash, not the data's fault);
        "problems": it finished and the inputs had problems (or the counts do not
        add up); "ok": every input read whole.
        """
        if self.error is not None:
            return "failed"
        if self.totals()["problems"] or self.checks():
            return "problems"
        return "ok"

    @classmethod
    def from_units(
        cls,
        units: Iterable[Any],
        counts: dict[str, dict[str, Any]],
        output: str,
        layout: str,
        seconds: float,
        rows_written: int | None = None,
        files_written: int = 0,
    ) -> Summary:
        """The summary of a finished run, its units' counts folded into one per file.

        Args:
            units: The planned units, in order.
            counts: Each unit's counts, by its key (the tasks' result rows); a
                unit missing here counts in `units_missing`.
            output: Where the messages table was written.
            layout: The --layout of the run.
            seconds: How long it ran.
            rows_written: Rows in the Parquet files of messages and entries (None:
                not known).
            files_written: Parquet files written.

        Returns:
            The run's summary (its tables and skipped left for the caller).
        """
        files: dict[str, FileSummary] = {}
        for unit in units:
            f = files.get(unit.path)
            if f is None:
                f = files[unit.path] = FileSummary(unit.path, unit.format, unit.size)
            got = counts.get(unit.key)
            if got is None:
                f.units_missing += 1
            else:
                f.add_unit(got)
        return cls(list(files.values()), output, layout, seconds, rows_written, files_written)

    def totals(self) -> dict[str, Any]:
        """The sums over every file, and the run's own counts.

        Returns:
            A dict: "files", the files' counts summed (size, bytes_read, ...,
            write_seconds), the breakdowns merged (per_layout, per_msg_type,
            per_error_kind, per_stream, notes; most common first), "entries",
            "peak_rss_mb", "files_with_problems", "rows_written" and
            "files_written".
        """
        t: dict[str, Any] = {"files": len(self.files)}
        for name in (
            "size",
            "bytes_read",
            "packets",
            "messages",
            "problems",
            "rows",
            "gaps",
            "gap_bytes",
            "read_seconds",
            "decode_seconds",
            "write_seconds",
        ):
            t[name] = sum(getattr(f, name) for f in self.files)
        for name in [b for b, _ in BREAKDOWNS] + ["per_stream"]:
            c: Counter[str] = Counter()
            for f in self.files:
                c.update(getattr(f, name))
            t[name] = dict(c.most_common())
        notes: Counter[str] = Counter()
        for f in self.files:
            notes.update(f.notes)
        t["notes"] = dict(notes.most_common())
        t["entries"] = sum(f.messages for f in self.files if f.format == "segment")
        t["peak_rss_mb"] = max((f.peak_rss_mb for f in self.files), default=0.0)
        t["files_with_problems"] = sum(1 for f in self.files if f.problems)
        t["rows_written"] = self.rows_written
        t["files_written"] = self.files_written
        return t

    def checks(self) -> list[str]:
        """Where the counts do not add up.

        A failed run counted nothing, so there is nothing to add up.

        Returns:
            One line per count that does not add up; an empty list when they all
            do.
        """
        bad: list[str] = []
        if self.error is not None:
            return bad
        for f in self.files:
            if f.units_missing:
                bad.append(f"{f.path}: counts of {f.units_missing} of its parts never came back")
            if f.rows != f.messages + f.problems:
                bad.append(
                    f"{f.path}: rows {f.rows} != messages {f.messages} + problems {f.problems}"
                )
            for name, _ in BREAKDOWNS:
                s = sum(getattr(f, name).values())
                if s != f.rows:
                    bad.append(f"{f.path}: {name} sums to {s}, rows are {f.rows}")
        rows = sum(f.rows for f in self.files)
        if self.rows_written is not None and self.rows_written != rows:
            bad.append(f"the Parquet files hold {self.rows_written} rows, {rows} were counted")
        return bad

    @property
    def rows_per_second(self) -> float:
        """Rows read per second of the run (0.0 when its time is unknown)."""
        return self.totals()["rows"] / self.seconds if self.seconds else 0.0

    def to_json_dict(self) -> dict[str, Any]:
        """The summary as summary.json holds it.

        Returns:
            A JSON-ready dict: outcome, output, layout, seconds, rows_per_second,
            totals, checks, files, skipped, and tables (a finished run) or error
            (a failed one).
        """
        d = {
            "outcome": self.outcome,
            "output": self.output,
            "layout": self.layout,
            "seconds": round(self.seconds, 3),
            "rows_per_second": round(self.rows_per_second, 1),
            "totals": self.totals(),
            "checks": self.checks(),
            "files": [asdict(f) for f in self.files],
            "skipped": list(self.skipped),
        }
        if self.error is None:
            d["tables"] = {k: dict(v) for k, v in self.tables.items()}
        if self.error is not None:
            d["error"] = self.error
        return d

    def table(self, max_files: int = 40) -> str:
        """The summary for people: one line per file, the totals, the breakdowns.

        Paths, stream names and problems are escaped for the terminal.

        Args:
            max_files: The most files shown one per line; the rest are one line of
                sums.

        Returns:
            The text, lines joined by newlines (no final newline).
        """
        t = self.totals()
        head = ("input", "format", "bytes read", "packets", "messages", "gaps", "problems", "rows")
        under, names = shown_paths([f.path for f in self.files])
        lines = [
            [name, f.format, f.bytes_read, f.packets, f.messages, f.gaps, f.problems, f.rows]
            for name, f in zip(names, self.files)
        ]
        shown = lines[:max_files]
        if len(lines) > max_files:
            rest = self.files[max_files:]
            shown.append(
                [
                    f"... {len(rest)} more",
                    "",
                    *(
                        sum(getattr(f, n) for f in rest)
                        for n in ("bytes_read", "packets", "messages", "gaps", "problems", "rows")
                    ),
                ]
            )
        shown.append(
            [
                "total",
                "",
                t["bytes_read"],
                t["packets"],
                t["messages"],
                t["gaps"],
                t["problems"],
                t["rows"],
            ]
        )
        cells = [[c if isinstance(c, str) else f"{c:,}" for c in row] for row in shown]
        widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(head)]

        def line(row: Iterable[str]) -> str:
            return "  ".join(
                c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))
            ).rstrip()

        out = [f"inputs under {under}"] if under else []
        out += [line(head)] + [line(r) for r in cells]
        for title, (key, _) in zip(("per layout", "per MsgType", "per error kind"), BREAKDOWNS):
            out += _wrapped(f"{title + ':':<16}", [f"{k} {v:,}" for k, v in t[key].items()])
        if t["per_stream"]:  # stored entries of data directories
            out += _wrapped(
                f"{'per stream:':<16}", [f"{k} {v:,}" for k, v in t["per_stream"].items()]
            )
        if t["notes"]:  # normal client or capture behaviour (a cancelled call...)
            out += _wrapped(
                f"{'notes:':<16}",
                [f"{k} {v:,}" for k, v in t["notes"].items()]
                + ["(normal client or capture behaviour, not problems)"],
            )
        # Where the tasks' lbparse was, compiled or not (a cluster's executors may differ).
        builds = list(dict.fromkeys(b for f in self.files for b in f.decoded_by))
        out += _wrapped(f"{'decoded by:':<16}", builds) if builds else []
        problems = [e for f in self.files for e in f.file_errors]
        for e in problems[:20]:
            out.append(f"problem: {e}")
        if len(problems) > 20:
            out.append(f"... and {len(problems) - 20} more problems (summary.json has them all)")
        for item in self.skipped[:20]:
            out.append(f"skipped: {item['path']}: {item['reason']}")
        if len(self.skipped) > 20:
            out.append(f"... and {len(self.skipped) - 20} more skipped (summary.json has them all)")
        for c in self.checks():
            out.append(f"COUNTS DO NOT ADD UP: {c}")
        # Paths, stream names and problems come from the inputs: escaped for the terminal.
        return "\n".join(printable(x) for x in out)


def _wrapped(head: str, items: list[str], width: int = 100) -> list[str]:
    """`head`, then the items joined by " | " on lines of at most `width`."""
    lines: list[list[str]] = [[]]
    for item in items or ["-"]:
        if lines[-1] and len(head) + len(" | ".join(lines[-1] + [item])) > width:
            lines.append([])
        lines[-1].append(item)
    return [
        (head if i == 0 else " " * len(head)) + " | ".join(line) for i, line in enumerate(lines)
    ]


def shown_paths(paths: list[str], width: int = 44) -> tuple[str, list[str]]:
    """The directory the paths share ("" if none worth saying) and each path
    as the summary shows it: below that directory, and cut in the middle
    (whole directories first) when longer than `width`. Cut from the left,
    the 21 segments of a data directory all read `...0/00000000000000000000.log`;
    rows must stay apart, so a cut that makes two rows alike is not made."""
    under = _common_dir(paths) if len(set(paths)) > 1 else ""
    rest = [p[len(under) :] for p in paths]
    cut = [_cut(p, width) for p in rest]
    seen = Counter(cut)
    return under, [c if seen[c] == 1 else p for c, p in zip(cut, rest)]


def _common_dir(paths: list[str]) -> str:
    """The longest directory, ending in "/", that holds every path; "" for the
    root alone (nothing to take off)."""
    dirs = [p.split("/")[:-1] for p in paths]
    common: list[str] = []
    for parts in zip(*dirs):
        if any(part != parts[0] for part in parts):
            break
        common.append(parts[0])
    prefix = "/".join(common)
    return prefix + "/" if prefix.strip("/") else ""


def _cut(path: str, width: int) -> str:
    """`path` in at most `width` characters: its first directory (below the
    common one, where paths part), then as much of its end as fits (a
    segment's stream, partition and file name), what lies between written "…"."""
    if len(path) <= width:
        return path
    root = "/" if path.startswith("/") else ""
    parts = path[len(root) :].split("/")
    tail = [parts.pop()]
    head = [parts.pop(0)] if len(parts) > 1 else []

    def joined() -> str:
        return root + "/".join([*head, "…", *tail] if parts else [*head, *tail])

    while parts and len(root + "/".join([*head, "…", parts[-1], *tail])) <= width:
        tail.insert(0, parts.pop())
    while parts and len(root + "/".join([*head, parts[0], "…", *tail])) <= width:
        head.append(parts.pop(0))
    shown = joined()
    if len(shown) <= width:
        return shown
    half = (width - 1) // 2  # a name too long by itself: cut in its middle
    return shown[:half] + "…" + shown[-(width - 1 - half) :]
