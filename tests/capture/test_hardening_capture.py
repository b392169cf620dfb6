"""Nothing lost, end to end (issue 7): captures damaged in every way we know
(tests/support/damage.py), read by CaptureReader and by `lbparse capture`;
every message written is decoded, or reported with its error, or lost with
a notice that says so, and the counts add up."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from support.cli import LBPARSE
from support.damage import DAMAGES, check_accounting, damaged_captures

from lbparse.capture import CaptureReader
from lbparse.codec.limits import Limits

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", params=["pcap", "pcapng"])
def cases(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> list:
    return damaged_captures(tmp_path_factory.mktemp("damaged"), request.param)


@pytest.mark.parametrize("name", list(DAMAGES))
def test_reader_accounts_for_every_message(cases: list, name: str) -> None:
    case = next(c for c in cases if c.name == name)
    notices: list = []
    reader = CaptureReader(
        case.path,
        layout="v0",
        on_notice=notices.append,
        limits=Limits(**case.limits) if case.limits else None,
    )
    records = list(reader)
    tally = check_accounting(
        case,
        [(r.subject, r.error.kind if r.error else None, r.payload) for r in records],
        [n.kind for n in notices],
    )
    stats = reader.stats
    assert stats.messages == len(records) == tally["decoded"] + tally["errors"]
    assert dict(stats.errors) == dict(Counter(r.error.kind for r in records if r.error))
    assert dict(stats.notices) == dict(Counter(n.kind for n in notices))
    hits = Counter(n.limit for n in notices if n.limit)
    hits.update(r.error.limit for r in records if r.error and r.error.limit)
    assert dict(stats.limits) == dict(hits)
    if case.limits:
        assert set(stats.limits) == {"max_payload", "max_frame"}


_NOTICE = re.compile(r"^lbparse capture: (?P<file>.+?): (?P<kind>[a-z_]+): ", re.M)


def _cli(paths: list[str], extra: list[str]) -> tuple[list[dict], str, int]:
    out = subprocess.run(
        [*LBPARSE, "capture", "--layout", "v0", "--stats", *extra, *paths],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert "Traceback" not in out.stderr, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()], out.stderr, out.returncode


@pytest.mark.slow
def test_lbparse_capture_accounts_for_every_message(cases: list) -> None:
    """The same, through the command line: records on stdout, notices on
    stderr (one line each, naming the file), the --stats summary adding up."""
    runs = [[c for c in cases if not c.limits]] + [[c] for c in cases if c.limits]
    for group in runs:
        records, stderr, code = _cli([c.path for c in group], group[0].cli_args())
        assert code == (1 if any(c.lost or c.notices for c in group) else 0)
        notices = [(m["file"], m["kind"]) for m in _NOTICE.finditer(stderr)]
        total = 0
        for case in group:
            mine = [r for r in records if r["subject"].startswith(f"lb.{case.name}.")]
            total += len(mine)
            check_accounting(
                case,
                [
                    (
                        r["subject"],
                        r["error"]["kind"] if "error" in r else None,
                        base64.b64decode(r["payload"]),
                    )
                    for r in mine
                ],
                [kind for file, kind in notices if file == case.path],
            )
        assert total == len(records)
        summary = re.search(r"^messages (\d+)", stderr, re.M)
        assert summary and int(summary.group(1)) == len(records)
        errors = Counter(r["error"]["kind"] for r in records if "error" in r)
        for kind, count in errors.items():
            assert re.search(rf"^  {kind}\s+{count}$", stderr, re.M), (kind, count, stderr)
