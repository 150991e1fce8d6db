"""The receiver's spool: records read back whole, a torn tail skipped, group commit, adoption of dead spools."""

from __future__ import annotations

import threading
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from agentdesk.store.ingest.receiver_commit import GroupCommit, Pending
from agentdesk.store.ingest.receiver_spool import JSON, LOGS, PROTOBUF, TRACES, Position, Record, Spool, SpoolFull


def records(spool: Spool) -> list[Record]:
    return [r for adopted in spool.open() for r, _ in adopted.records()]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=8), st.integers(0, 60))
def test_a_torn_tail_is_skipped_and_every_whole_record_read_back(bodies: list[bytes], torn: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        written = [Record(TRACES if n % 2 else LOGS, PROTOBUF if n % 3 else JSON, b) for n, b in enumerate(bodies)]
        first = Spool(root, segment_bytes=400)  # small segments: several files, deleted as they drain
        first.open()
        first.append(written)
        segment = sorted(first.folder.glob("*.otlp"))[-1]
        with open(segment, "ab") as f:  # the record being written when the process died
            tail = written[-1].encoded()
            f.write(tail[:torn % len(tail)])
        first.close(remove=False)  # as a kill leaves it: the lock released, the folder kept
        assert records(Spool(root)) == written


def test_the_checkpoint_skips_what_was_drained_and_drained_segments_are_deleted(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=100)
    spool.open()
    recs = [Record(TRACES, JSON, bytes([n]) * 90) for n in range(4)]
    positions = [spool.append([r])[0] for r in recs]
    assert [p.segment for p in positions] == [1, 2, 3, 4]
    spool.reserve(sum(r.size for r in recs))
    spool.drained(positions[1], recs[0].size + recs[1].size)
    # segment 1 is gone; 2 goes once the checkpoint passes it; 5 is the one being appended to
    assert sorted(p.name for p in spool.folder.glob("*.otlp")) == [f"000000000{n}.otlp" for n in (2, 3, 4, 5)]
    assert spool.pending_bytes == recs[2].size + recs[3].size
    spool.close(remove=False)
    assert records(Spool(tmp_path)) == recs[2:]


def test_a_running_receivers_spool_is_not_adopted(tmp_path: Path) -> None:
    alive = Spool(tmp_path)
    alive.open()
    alive.append([Record(TRACES, JSON, b"{}")])
    assert Spool(tmp_path).open() == []  # its lock is held: another receiver leaves it alone
    alive.close(remove=True)
    assert not alive.folder.exists()


def test_the_bound_refuses_once_something_waits(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=100)
    spool.reserve(150)  # alone, any request is taken (a body over the bound would never get in)
    try:
        spool.reserve(1)
        raise AssertionError("the bound let a request past it")
    except SpoolFull as exc:
        assert "waiting for the store" in str(exc)
    spool.release(150)
    spool.reserve(60)
    spool.reserve(40)


def test_requests_waiting_together_share_one_fsync_and_reach_the_writer_in_order(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.open()
    handed: list[tuple[bytes, Position]] = []
    told: list[BaseException | None] = []
    commit = GroupCommit(spool, lambda pending, position: handed.append((pending.record.body, position)))
    for n in range(20):  # all waiting before the thread takes any
        commit.submit(Pending(Record(TRACES, JSON, b"%d" % n), None, 1, told.append))
    all_told = threading.Event()
    commit.submit(Pending(Record(TRACES, JSON, b"last"), None, 1, lambda e: all_told.set()))
    commit.start()
    assert all_told.wait(10)
    commit.stop()
    assert commit.fsyncs == 1 and commit.requests == 21 and told == [None] * 20
    assert [b for b, _ in handed] == [b"%d" % n for n in range(20)] + [b"last"]
    assert [p for _, p in handed] == sorted(p for _, p in handed)
    spool.close(remove=True)
