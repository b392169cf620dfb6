"""The commit-log readers and `lbparse segments` under attack (issue #27):
one bad file is one finding, Liftbridge's reading of what it accepts, and
(in tests/test_storage_growth.py) linear time and bounded memory."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from lbparse.storage.checkpoints import LeaderEpoch, parse_high_watermark, parse_leader_epochs
from lbparse.storage.errors import StorageError
from support.cli import LBPARSE
from support.storage_fixtures import short_data  # noqa: F401 (a fixture)

HUGE = "9" * 5_000  # past Python's 4,300-digit limit of int()


def _segments(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LBPARSE, "segments", *args], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("text", [HUGE, "-" + HUGE, "1" * 21, "0" * 4_400 + "7"],
                         ids=["5000-nines", "negative", "21-digits", "leading-zeros"])
def test_a_checkpoint_number_of_thousands_of_digits_is_a_bad_checkpoint(text: str) -> None:
    with pytest.raises(StorageError, match="not a decimal 64-bit integer") as hw:
        parse_high_watermark(text.encode() + b"\n", "hw")
    assert hw.value.kind == "bad_checkpoint" and len(str(hw.value)) < 200
    with pytest.raises(StorageError, match="not a decimal 64-bit integer") as ep:
        parse_leader_epochs(f"0\n1\n{text} 0\n".encode(), "epochs")
    assert ep.value.kind == "bad_checkpoint" and ep.value.position == 4


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_damaged_three_node_data_directory_is_verified_whole(short_data: Path,  # noqa: F811
                                                               tmp_path: Path) -> None:
    """Every node damaged in a different file; every damage one finding with
    its file, none stopping the others, the exit status 1 (findings)."""
    data = tmp_path / "data"
    shutil.copytree(short_data, data)
    n1, n2, n3 = (data / f"node{i}" / "streams" for i in (1, 2, 3))
    _flip(n1 / "events" / "0" / "00000000000000000000.log", 40)  # a body byte: CRC
    (n2 / "orders" / "0" / "replication-offset-checkpoint").write_text(HUGE)
    (n3 / "orders" / "1" / "leader-epoch-checkpoint").write_text(f"0\n{HUGE}\n")
    (n3 / "orders" / "2" / "00000000000000000000.index").write_bytes(b"\x01" * 7)
    (n2 / "events" / "0" / "leader-epoch-checkpoint").write_bytes(b"\xff\xfe\n")
    garbage = n3 / "orders" / "0" / "00000000000000000000.log"
    garbage.write_bytes(garbage.read_bytes() + b"\x07" * 50)
    res = _segments("--verify", "--format", "jsonl", *(str(data / f"node{i}") for i in (1, 2, 3)))
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr and "finding(s)" in res.stderr
    found = {(str(Path(f["file"]).relative_to(data)), f["kind"])
             for f in map(json.loads, res.stdout.splitlines())}
    assert {("node1/streams/events/0/00000000000000000000.log", "crc_mismatch"),
            ("node2/streams/orders/0/replication-offset-checkpoint", "bad_checkpoint"),
            ("node3/streams/orders/1/leader-epoch-checkpoint", "bad_checkpoint"),
            ("node3/streams/orders/2/00000000000000000000.index", "index_tail"),
            ("node2/streams/events/0/leader-epoch-checkpoint", "bad_checkpoint"),
            ("node3/streams/orders/0/00000000000000000000.log", "garbage"),
            } <= found, found


def _naive_against(epochs: list[LeaderEpoch], offset: int, epoch: int) -> bool:
    """The epoch check as it was written first: every line, for every entry."""
    return any((offset > ep.start_offset and epoch < ep.epoch)
               or (offset < ep.start_offset and epoch >= ep.epoch) for ep in epochs)


@pytest.mark.parametrize("seed", range(30))
def test_the_epoch_index_finds_what_every_line_finds(seed: int) -> None:
    from lbparse.storage.verify import _EpochIndex

    rnd = random.Random(seed)
    epochs = [LeaderEpoch(rnd.randrange(6), rnd.randrange(30)) for _ in range(rnd.randrange(8))]
    index = _EpochIndex(epochs)
    for offset in range(-1, 32):
        for epoch in range(-1, 7):
            ep = index.against(offset, epoch)
            assert (ep is not None) == _naive_against(epochs, offset, epoch)
            if ep is not None:
                assert _naive_against([ep], offset, epoch)
