"""Tampering with the audit table is reported, with the record it hit and how, and never crashes verify."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from agentdesk.store.audit import Failure, Verdict, record_hash, verify_store
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World
from tests.store.audit.helpers import rows, seqs, sql, verify

COLUMNS = ("actor", "action", "entity", "entity_id", "payload", "prev_hash", "hash", "mac")


def test_the_intact_log_verifies_signed_and_anchored(store: Store, world: World, store_path: Path) -> None:
    report = verify(store)
    assert report.verdict == Verdict.INTACT and report.reason is None
    assert report.records == len(seqs(store_path)) and report.keyed_from == 1
    assert report.anchored_seq == seqs(store_path)[-1]


def _flip(value: str, position: int) -> str | bytes:
    raw = bytearray(value.encode())
    raw[position] ^= 0x01
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return bytes(raw)  # not text any more: it lands as a blob, which verify must report, not raise on


def test_every_single_byte_change_is_detected(store: Store, world: World, store_path: Path) -> None:
    """Every byte of every column of the first, a middle and the last record, one change at a time."""
    all_seqs = seqs(store_path)
    picked = [all_seqs[0], all_seqs[len(all_seqs) // 2], all_seqs[-1]]
    tried = 0
    with store.write_engine.connect() as conn:
        for seq in picked:
            for column in COLUMNS:
                original = rows(store_path, f"SELECT {column} FROM audit_log WHERE seq = ?", seq)[0][0]
                assert isinstance(original, str)
                for position in range(len(original.encode())):
                    trans = conn.begin()
                    conn.execute(text(f"UPDATE audit_log SET {column} = :v WHERE seq = :s"),
                                 {"v": _flip(original, position), "s": seq})
                    report = verify_store(Session(bind=conn))
                    trans.rollback()
                    assert report.verdict == Verdict.TAMPERED, (seq, column, position)
                    assert report.broken_seq == seq, (seq, column, position, report.reason)
                    tried += 1
            trans = conn.begin()
            conn.execute(text("UPDATE audit_log SET at = at + 1e-6 WHERE seq = :s"), {"s": seq})
            assert verify_store(Session(bind=conn)).failure == Failure.CONTENT_CHANGED
            trans.rollback()
    assert tried > 900  # 7 text columns of 3 records, hashes alone 3 x 3 x 64 bytes


def test_rehashing_everything_without_the_key_is_detected(store: Store, world: World, store_path: Path) -> None:
    """The attack the old chain could not see: change a past decision and recompute every hash after it."""
    records = rows(store_path, "SELECT seq, at, actor, action, entity, entity_id, payload FROM audit_log "
                               "ORDER BY seq")
    forged_at = int(str(records[2][0]))
    prev = "0" * 64
    conn = sqlite3.connect(store_path)
    for seq, at, actor, action, entity, entity_id, payload in records:
        if seq == forged_at:
            payload = json.dumps({"name": "forged"})
        digest = record_hash(prev, at, actor, action, entity, entity_id, payload)  # type: ignore[arg-type]
        conn.execute("UPDATE audit_log SET payload = ?, prev_hash = ?, hash = ? WHERE seq = ?",
                     (payload, prev, digest, seq))
        prev = digest
    conn.commit()
    conn.close()
    report = verify(store)
    assert (report.verdict, report.failure, report.broken_seq) == (Verdict.TAMPERED, Failure.REHASHED_WITHOUT_KEY,
                                                                     forged_at)
    assert report.reason == (f"Record {forged_at} was re-hashed without the key: its hash matches its content but "
                             "its HMAC does not.")


def test_stripping_the_macs_does_not_pass_as_an_old_store(store: Store, world: World, store_path: Path) -> None:
    sql(store_path, "UPDATE audit_log SET mac = NULL")
    report = verify(store)
    assert report.failure == Failure.REHASHED_WITHOUT_KEY and report.broken_seq == seqs(store_path)[0]
    assert "carries no HMAC" in (report.reason or "")


@pytest.mark.parametrize("dropped", [1, 5])
def test_deleting_the_last_records_is_detected(store: Store, world: World, store_path: Path, dropped: int) -> None:
    all_seqs = seqs(store_path)
    kept = all_seqs[-dropped - 1]
    sql(store_path, "DELETE FROM audit_log WHERE seq > ?", kept)
    report = verify(store)
    assert (report.verdict, report.failure, report.broken_seq) == (Verdict.TAMPERED, Failure.RECORDS_MISSING_AFTER,
                                                                     kept + 1)
    assert report.reason is not None and report.reason.startswith(f"Records are missing after {kept}:")
    assert f"up to record {all_seqs[-1]}" in report.reason


def test_deleting_every_record_is_detected(store: Store, world: World, store_path: Path) -> None:
    total = len(seqs(store_path))
    sql(store_path, "DELETE FROM audit_log")
    report = verify(store)
    assert (report.verdict, report.failure) == (Verdict.TAMPERED, Failure.TABLE_REPLACED)
    assert report.reason is not None and report.reason.startswith(f"All {total} audit records are missing")


def test_deleting_the_first_records_is_detected(store: Store, world: World, store_path: Path) -> None:
    first = seqs(store_path)
    sql(store_path, "DELETE FROM audit_log WHERE seq <= ?", first[1])
    report = verify(store)
    assert report.failure == Failure.RECORD_MISSING and report.broken_seq == first[2]
    assert report.reason is not None and report.reason.startswith(f"Records before {first[2]} are missing")


def _recreate(path: Path) -> None:
    ddl = rows(path, "SELECT sql FROM sqlite_master WHERE name = 'audit_log'")[0][0]
    sql(path, "DROP TABLE audit_log")
    sql(path, str(ddl))


def test_drop_and_recreate_is_detected_empty(store: Store, world: World, store_path: Path) -> None:
    _recreate(store_path)
    report = verify(store)
    assert (report.verdict, report.failure) == (Verdict.TAMPERED, Failure.TABLE_REPLACED)


def test_drop_and_recreate_is_detected_after_new_writes(store: Store, world: World, store_path: Path,
                                                       rt: AgentRuntime) -> None:
    """A replaced table refilled through agentdesk itself (valid chain, valid MACs) is still not the anchored one."""
    _recreate(store_path)
    rt.create_project("history starts again")
    report = verify(store)
    assert (report.verdict, report.failure, report.broken_seq) == (Verdict.TAMPERED, Failure.TABLE_REPLACED, 1)
    assert report.reason is not None and report.reason.startswith("The audit table was replaced: record 1")


def test_a_dropped_table_is_reported(store: Store, world: World, store_path: Path) -> None:
    sql(store_path, "DROP TABLE audit_log")
    with store.reading() as session:
        report = verify_store(session)
    assert (report.verdict, report.failure) == (Verdict.TAMPERED, Failure.TABLE_REPLACED)
    assert report.reason is not None and report.reason.startswith("The audit table is gone")


def test_renumbering_the_last_record_is_detected(store: Store, world: World, store_path: Path) -> None:
    last = seqs(store_path)[-1]
    sql(store_path, "UPDATE audit_log SET seq = ? WHERE seq = ?", last + 100, last)
    report = verify(store)
    assert (report.failure, report.broken_seq) == (Failure.RECORD_MISSING, last)


@pytest.mark.parametrize("column", ["actor", "payload", "hash", "prev_hash", "mac", "at"])
def test_a_blob_in_any_column_is_reported_not_raised(store: Store, world: World, store_path: Path,
                                                     column: str) -> None:
    middle = seqs(store_path)[3]
    sql(store_path, f"UPDATE audit_log SET {column} = ? WHERE seq = ?", b"\x00\xffbinary", middle)
    report = verify(store)
    assert (report.verdict, report.broken_seq) == (Verdict.TAMPERED, middle)
    assert report.reason is not None and "binary data (8 bytes)" in report.reason


def test_a_rewrite_by_someone_holding_the_key_shows_against_the_anchor(store: Store, world: World,
                                                                      store_path: Path) -> None:
    """With the key, the chain and MACs can be redone; the anchor still remembers the old heads."""
    from agentdesk.store.audit import keys, store_id_of

    with store.reading() as session:
        sid = store_id_of(session)
    assert sid is not None
    key = keys.load_key(sid)
    assert key is not None
    records = rows(store_path, "SELECT seq, at, actor, action, entity, entity_id, payload FROM audit_log "
                               "ORDER BY seq")
    prev, conn = "0" * 64, sqlite3.connect(store_path)
    last = int(str(records[-1][0]))
    for seq, at, actor, action, entity, entity_id, payload in records:
        if seq == last:
            payload = json.dumps({"name": "forged"})
        digest = record_hash(prev, at, actor, action, entity, entity_id, payload)  # type: ignore[arg-type]
        conn.execute("UPDATE audit_log SET payload = ?, hash = ?, mac = ? WHERE seq = ?",
                     (payload, digest, key.mac(digest), seq))
        prev = digest
    conn.commit()
    conn.close()
    report = verify(store)
    assert (report.failure, report.broken_seq) == (Failure.REWRITTEN, last)


@pytest.mark.parametrize("column", ["mac", "hash"])
def test_non_ascii_text_in_a_hash_column_is_reported_not_raised(store: Store, world: World, store_path: Path,
                                                                column: str) -> None:
    """Found by the random tamper test: `hmac.compare_digest` raises TypeError on non-ASCII str."""
    middle = seqs(store_path)[3]
    sql(store_path, f"UPDATE audit_log SET {column} = ? WHERE seq = ?", "é" * 64, middle)
    report = verify(store)
    assert (report.verdict, report.broken_seq) == (Verdict.TAMPERED, middle)


def test_non_ascii_text_in_the_anchor_is_reported_not_raised(store: Store, world: World) -> None:
    from agentdesk.store.audit import keys, store_id_of

    with store.reading() as session:
        sid = store_id_of(session)
    assert sid is not None
    with keys.anchor_path(sid).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"type": "anchor", "seq": 1, "hash": "é", "mac": "ü"}) + "\n")
    assert verify(store).failure == Failure.ANCHOR_FORGED


def test_renumbering_the_first_record_below_the_key_is_detected(store: Store, world: World,
                                                                store_path: Path) -> None:
    sql(store_path, "UPDATE audit_log SET seq = 0 WHERE seq = 1")
    report = verify(store)
    assert (report.failure, report.broken_seq) == (Failure.RECORD_MISSING, 0)
    assert report.reason is not None and report.reason.startswith("Record 0 was renumbered")
