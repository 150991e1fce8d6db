"""Backup → more writes → restore → verify names the restore once → rebase → verify clean, on both backends.

And the attacker's side: records deleted without a restore (even back to a backup's marker) stay tampering.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentdesk.store.audit import Failure, Verdict
from agentdesk.store.audit import restore as marks
from agentdesk.store.backup.commands import backup, rebase_anchors, restore
from agentdesk.store.errors import AuditChainBroken, InvalidInput
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import PgCluster, PgLocation, raw_connect
from tests.store.audit.helpers import verify


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "team.sqlite")
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    url = cluster.fresh_database()
    request.addfinalizer(lambda: cluster.drop(url))
    return PgLocation(url)


@pytest.fixture
def opened(where: str) -> Iterator[Store]:
    store = open_store(where)
    yield store
    store.close()


def _work(store: Store, runs: int) -> None:
    rt = AgentRuntime(store)
    pid = rt.create_project("Payments")
    sid = rt.create_session(rt.create_task(pid, "task"), "session")
    agent = rt.create_agent(sid, "planner", "model-a")
    for n in range(runs):
        rt.start_run(agent, f"run {n}")


def _last(store: Store) -> int:
    last = verify(store).last_seq
    assert last is not None
    return last


def _delete_after(where: str, seq: int) -> None:
    raw = raw_connect(where if isinstance(where, PgLocation) else Path(where))  # type: ignore[arg-type]
    try:
        raw.execute("DELETE FROM audit_log WHERE seq > ?", (seq,))
        raw.commit()
    finally:
        raw.close()


def test_a_restore_is_named_once_then_rebased_clean(opened: Store, where: str, tmp_path: Path) -> None:
    _work(opened, 2)
    done = backup(opened, tmp_path / "before.backup")
    assert done.file.stat().st_mode & 0o077 == 0
    if done.key_file is not None:
        assert done.key_file.stat().st_mode & 0o077 == 0
    _work(opened, 3)  # written after the backup: this machine's anchor sees them
    later = _last(opened)
    opened.close()

    with pytest.raises(InvalidInput, match="add --force"):
        restore(where, done.file, force=False, busy_timeout_s=5)
    restored = restore(where, done.file, force=True, busy_timeout_s=5)
    assert restored.mark is not None and restored.mark.backup_id == done.mark.backup_id
    assert restored.record is not None and restored.head < later

    store = open_store(where)
    try:
        report = verify(store)
        assert report.verdict == Verdict.INTACT, report.reason
        gone = later - restored.head
        assert len(report.restored) == 1
        assert report.restored[0].startswith("restored from a backup taken at ")
        assert f"{gone:,} anchored records after it are gone" in report.restored[0]
        _work(store, 1)  # the restored store goes on being written: still one sentence, still intact
        again = verify(store)
        assert again.verdict == Verdict.INTACT and again.restored == report.restored

        rebased = rebase_anchors(store)
        assert rebased.lines > 0 and rebased.archive is not None and rebased.archive.exists()
        clean = verify(store)
        assert clean.verdict == Verdict.INTACT and clean.restored == () and clean.reason is None
        assert rebase_anchors(store).lines == 0  # nothing left to re-base

        # After the restore and rebase, a truncation is caught as ever.
        _work(store, 1)
        _delete_after(where, _last(store) - 2)
        caught = verify(store)
        assert caught.verdict == Verdict.TAMPERED and caught.failure == Failure.RECORDS_MISSING_AFTER
        with pytest.raises(AuditChainBroken, match="Nothing was re-based"):
            rebase_anchors(store)
    finally:
        store.close()


def test_deleting_back_to_a_backup_marker_is_still_tampering(opened: Store, where: str, tmp_path: Path) -> None:
    """The attacker's restore: the tail deleted back to the backup's marker, with no restore record."""
    _work(opened, 2)
    done = backup(opened, tmp_path / "before.backup")
    _work(opened, 3)
    _delete_after(where, done.mark.seq)
    report = verify(opened)
    assert report.verdict == Verdict.TAMPERED and report.failure == Failure.RECORDS_MISSING_AFTER
    assert report.restored == ()


def test_a_restore_record_without_its_backup_marker_does_not_excuse_anything(opened: Store, where: str) -> None:
    """A store.restore record naming a backup the chain does not hold is no restore (only the owner or the key
    could append one at all; here the owner's store appends it)."""
    from agentdesk.store.uow import UnitOfWork

    _work(opened, 3)
    head = _last(opened)
    _delete_after(where, head - 3)
    with UnitOfWork(opened) as uow:
        uow.audit("mallory", marks.RESTORE_ACTION, marks.ENTITY, "x", {
            "backup_id": "x", "taken_at": 1.0, "backup_seq": 1, "head": head - 3})
    report = verify(opened)
    assert report.verdict == Verdict.TAMPERED and report.restored == ()
