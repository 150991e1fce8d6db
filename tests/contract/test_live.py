"""Following and leaving alone: another connection's commit arrives as changes; a read-only open writes nothing."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from agentdesk.store.persistence.bus import ChangeOp, EntityKind
from agentdesk.store.source import Source
from tests.contract.kinds import Kind
from tests.contract.test_reads import walk
from tests.store.sources.foreign_helpers import Collector
from tests.waiting import watcher_polled


def test_a_commit_from_another_connection_arrives_as_changes(reader: Source, kind: Kind,
                                                             built: tuple[Path, dict[str, str]]) -> None:
    path, ids = built
    heard = Collector(reader)
    watcher = reader.watch()
    expected = kind.write(path, ids)
    for entity, op, entity_id in sorted(expected):
        _, change = heard.wait_for(entity, op, entity_id, timeout=5.0)
        assert isinstance(change.entity, EntityKind) and isinstance(change.op, ChangeOp)
        assert change.entity == EntityKind.APPROVAL or "run" in change.parents  # a span names its run
        if change.entity == EntityKind.SPAN:  # and the timeline can fetch exactly that span by its id
            assert reader.span_table(change.parents["run"], [change.id]).ids == [change.id]
    assert watcher.healthy and watcher.last_change_at is not None
    announced = {(c.parents["run"], c.id) for _, c in heard.changes
                 if c.entity == EntityKind.SPAN and c.op != ChangeOp.DELETE}
    for run_id, span_id in sorted(announced):  # no change names a span the timeline cannot fetch
        assert reader.span_table(run_id, [span_id]).ids == [span_id], span_id
    assert not [c for _, c in heard.changes if c.op == ChangeOp.RESET]  # followed exactly, no reload


def digest(path: Path) -> tuple[str, str]:
    """sha256 of the database and of its WAL (an absent WAL counts as empty)."""
    wal = Path(f"{path}-wal")
    return (hashlib.sha256(path.read_bytes()).hexdigest(),
            hashlib.sha256(wal.read_bytes() if wal.exists() else b"").hexdigest())


def test_a_read_only_open_leaves_the_database_and_its_wal_unchanged(kind: Kind,
                                                                    built: tuple[Path, dict[str, str]]) -> None:
    path = built[0]
    runtime = sqlite3.connect(path, isolation_level=None)  # the runtime, alive, its last commit in the WAL
    runtime.execute("PRAGMA wal_autocheckpoint = 0")
    version = runtime.execute("PRAGMA user_version").fetchone()[0]
    runtime.execute(f"PRAGMA user_version = {int(version)}")
    try:
        before = digest(path)
        source = kind.open(path, writes=False)
        watcher = source.watch()
        for _, _, _, agent, run in walk(source)[:40]:
            source.context(agent.id)
            for span_id in source.span_table(run.id).ids[:10]:
                source.span(span_id)
                source.sent_context(span_id)
        for approval in source.approvals("all"):
            source.approval(approval.id)
        source.info()
        source.showcase_run()
        watcher_polled(watcher)
        source.close()
        assert digest(path) == before
        runtime.execute(f"PRAGMA user_version = {int(version) + 1}")  # control: a write does show
        assert digest(path) != before
    finally:
        runtime.close()
