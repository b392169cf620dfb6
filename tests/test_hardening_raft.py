"""raft.db under attack (issue #27): memory bounded by the limits, sparse
files mapped rather than read, each page problem named for what it is,
every problem said in every output format, time and memory linear.

The files are crafted page by page (tests/support/bolt_builder.py). The
timing and memory-growth tests are `slow`; the others are not.
"""

from __future__ import annotations

from lbparse.storage.bbolt import MAX_DEPTH, BoltDB
from support import bolt_builder as bb


def _tree(pages: dict[int, bytes], root: int) -> BoltDB:
    return BoltDB(bb.raft_db(pages, logs_root=root))


# -- 4. words that are right: depth limits, pages reached twice, loops ---------------

def _leaf5() -> bytes:
    return bb.leaf(5, [(0, bb.key(1), bb.log_value(1))])


def test_a_deep_chain_is_said_to_pass_the_depth_limit() -> None:
    """A chain of branch pages deeper than MAX_DEPTH was 'reached twice (a loop)'."""
    depth = MAX_DEPTH + 6
    pages = {10 + i: bb.branch(10 + i, [(bb.key(1), 11 + i)]) for i in range(depth)}
    pages[10 + depth] = bb.leaf(10 + depth, [(0, bb.key(1), bb.log_value(1))])
    db = _tree(pages, 10)
    assert list(db.bucket(b"logs")) == []
    [f] = db.findings
    assert "depth limit of 64" in f.message and "loop" not in f.message and "twice" not in \
        f.message
    assert f.position == (10 + MAX_DEPTH) * bb.PAGE


def test_a_chain_within_the_depth_limit_is_read() -> None:
    pages = {10 + i: bb.branch(10 + i, [(bb.key(1), 11 + i)]) for i in range(MAX_DEPTH - 1)}
    last = 10 + MAX_DEPTH - 1
    pages[last] = bb.leaf(last, [(0, bb.key(1), bb.log_value(1))])
    db = _tree(pages, 10)
    assert [bytes(e.key) for e in db.bucket(b"logs")] == [bb.key(1)] and db.findings == []


def test_a_page_reached_twice_is_not_called_a_loop() -> None:
    """A branch whose children share a page (a DAG, not a loop)."""
    db = _tree({4: bb.branch(4, [(bb.key(1), 5), (bb.key(2), 5), (bb.key(3), 5)]),
                5: _leaf5()}, 4)
    assert [bytes(e.key) for e in db.bucket(b"logs")] == [bb.key(1)]
    assert len(db.findings) == 2
    for f in db.findings:
        assert "reached a second time (from branch page 4)" in f.message
        assert "loop" not in f.message and f.position == 5 * bb.PAGE


def test_a_real_loop_is_called_a_loop() -> None:
    db = _tree({4: bb.branch(4, [(bb.key(1), 6)]), 6: bb.branch(6, [(bb.key(1), 5),
                                                                     (bb.key(2), 4)]),
                5: _leaf5()}, 4)
    assert [bytes(e.key) for e in db.bucket(b"logs")] == [bb.key(1)]
    [f] = db.findings
    assert "page 4 is its own ancestor, a loop (4 -> 6 -> 4)" in f.message
