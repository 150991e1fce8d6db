"""The hash-chained audit log: it verifies, and tampering is reported at the record it hit."""

from __future__ import annotations

from pathlib import Path

from agentdesk.store.audit import GENESIS, ChainReport, record_hash, verify_chain
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World, raw_connect


def report(store: Store, batch: int = 5000) -> ChainReport:
    with store.reading() as session:
        return verify_chain(session, batch=batch)


def seqs(path: Path) -> list[int]:
    conn = raw_connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT seq FROM audit_log ORDER BY seq")]
    finally:
        conn.close()


def tamper(path: Path, sql: str, *params: object) -> None:
    conn = raw_connect(path)
    conn.execute(sql, params)
    conn.commit()
    conn.close()


def test_an_empty_log_verifies(store: Store) -> None:
    # a PostgreSQL store holds its key from migration 0008 on, before any record: it signs from record 1
    assert report(store) == ChainReport(0, None, None, keyed_from=1 if store.is_postgres else None)


def test_the_chain_verifies_across_batches(source: NativeSource, store: Store, world: World,
                                           store_path: Path) -> None:
    source.decide(world.approval, approve=True, actor="alice")
    full = report(store)
    assert full.ok and full.records == len(seqs(store_path))
    assert report(store, batch=2) == full
    first = source.audit_records(limit=1000)[-1]
    assert first.prev_hash == GENESIS


def test_an_edited_record_is_reported_at_its_seq(store: Store, world: World, store_path: Path) -> None:
    middle = seqs(store_path)[3]
    tamper(store_path, "UPDATE audit_log SET payload = '{\"name\":\"forged\"}' WHERE seq = ?", middle)
    broken = report(store)
    assert (broken.broken_seq, broken.records) == (middle, 3)
    assert broken.reason is not None and "content" in broken.reason


def test_a_rehashed_forgery_is_caught_at_the_forged_record(store: Store, world: World, store_path: Path) -> None:
    all_seqs = seqs(store_path)
    middle = all_seqs[3]
    conn = raw_connect(store_path)
    prev, at, actor, action, entity, entity_id = conn.execute(
        "SELECT prev_hash, at, actor, action, entity, entity_id FROM audit_log WHERE seq = ?",
        (middle,)).fetchone()
    conn.close()
    forged = '{"name":"forged"}'
    digest = record_hash(prev, at, actor, action, entity, entity_id, forged)
    tamper(store_path, "UPDATE audit_log SET payload = ?, hash = ? WHERE seq = ?", forged, digest, middle)
    broken = report(store)
    assert broken.broken_seq == middle  # its hash holds, but without the key its HMAC cannot
    assert broken.reason is not None and "re-hashed without the key" in broken.reason


def test_a_deleted_record_is_reported(store: Store, world: World, store_path: Path) -> None:
    all_seqs = seqs(store_path)
    tamper(store_path, "DELETE FROM audit_log WHERE seq = ?", all_seqs[2])
    broken = report(store)
    assert broken.broken_seq == all_seqs[3]
    assert broken.reason is not None and f"record {all_seqs[2]} is gone" in broken.reason


def test_the_chain_continues_across_store_handles(store: Store, store_path: Path, world: World) -> None:
    from agentdesk.store.persistence.database import open_store

    other = open_store(str(store_path))
    try:
        AgentRuntime(other).create_project("second writer")
        AgentRuntime(store).create_project("first writer again")
    finally:
        other.close()
    assert report(store).ok
