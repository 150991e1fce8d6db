"""Where the key and anchor live, what a failed anchor write means, and stores from before keying."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest
from alembic import command

from agentdesk.store.audit import Failure, Verdict, keys, store_id_of
from agentdesk.store.persistence.database import Store, alembic_config, open_store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World
from tests.store.audit.helpers import rows, seqs, sql, verify


def _store_id(store: Store) -> str:
    with store.reading() as session:
        found = store_id_of(session)
    assert found is not None
    return found


def test_key_and_anchor_are_owner_only_in_the_config_folder(store: Store, world: World,
                                                            audit_config_dir: Path) -> None:
    sid = _store_id(store)
    folder = audit_config_dir / "audit"
    assert keys.key_path(sid).parent == folder
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for path in (keys.key_path(sid), keys.anchor_path(sid)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = keys.load_key(sid)
    assert key is not None and key.keyed_from == 1 and len(key.secret) == 32


def test_every_audited_commit_appends_its_head(store: Store, world: World, store_path: Path,
                                               rt: AgentRuntime) -> None:
    anchor = keys.read_anchor(keys.anchor_path(_store_id(store)))
    assert anchor is not None and anchor.max_seq == seqs(store_path)[-1]
    lines_before = len(keys.anchor_path(_store_id(store)).read_text().splitlines())
    rt.create_project("one more")
    assert len(keys.anchor_path(_store_id(store)).read_text().splitlines()) == lines_before + 1
    assert keys.read_anchor(keys.anchor_path(_store_id(store))).max_seq == seqs(store_path)[-1]  # type: ignore[union-attr]


def test_a_failed_anchor_write_keeps_the_commit_and_reads_as_behind(
        store: Store, world: World, store_path: Path, rt: AgentRuntime, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    def refuse(*args: object) -> Path:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(keys, "append_anchor", refuse)
    with caplog.at_level(logging.WARNING, logger="agentdesk.audit"):
        pid = rt.create_project("committed, not anchored")
    assert rows(store_path, "SELECT name FROM projects WHERE id = ?", pid) == [("committed, not anchored",)]
    assert "could not be written" in caplog.text and "No space left on device" in caplog.text
    report = verify(store)
    assert report.verdict == Verdict.INTACT
    assert any(note.startswith("the anchor is behind: records after") for note in report.notes)


def test_a_tampered_anchor_line_is_reported(store: Store, world: World) -> None:
    path = keys.anchor_path(_store_id(store))
    text = path.read_text().splitlines()
    text[0] = text[0].replace('"mac": "', '"mac": "00')
    path.write_text("\n".join(text) + "\n")
    report = verify(store)
    assert report.failure == Failure.ANCHOR_FORGED


def test_no_key_on_this_machine_cannot_be_checked(store: Store, world: World) -> None:
    keys.key_path(_store_id(store)).unlink()
    report = verify(store)
    assert report.verdict == Verdict.CANNOT_CHECK
    assert report.reason is not None and report.reason.startswith("The signatures cannot be checked")


def test_a_changed_identity_does_not_pass(store: Store, world: World, store_path: Path) -> None:
    """Strip every MAC and give the store a new id: no key for it here, but this location has another's anchor."""
    sql(store_path, "UPDATE audit_log SET mac = NULL")
    sql(store_path, "UPDATE agentdesk_meta SET value = 'f' || value WHERE key = 'store_id'")
    report = verify(store)
    assert (report.verdict, report.failure) == (Verdict.TAMPERED, Failure.TABLE_REPLACED)
    assert report.reason is not None and report.reason.startswith("The store's identity was changed")


def _as_before_keying(store: Store, store_path: Path) -> None:
    """A store as agentdesk left it before 0007: no mac column, no id, no key, no anchor."""
    sid = _store_id(store)
    with store.engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0003")
    sql(store_path, "DELETE FROM agentdesk_meta WHERE key = 'store_id'")
    keys.key_path(sid).unlink()
    keys.anchor_path(sid).unlink()


def test_a_store_from_before_keying_verifies_and_is_keyed_from_its_next_write(
        store: Store, world: World, store_path: Path) -> None:
    old = seqs(store_path)
    _as_before_keying(store, store_path)
    store.close()
    read_only = open_store(str(store_path), read_only=True, older_schema=True)  # not migrated, no mac column
    try:
        report = verify(read_only)
        assert report.verdict == Verdict.INTACT and report.records == len(old)
        assert any("no record is signed" in note for note in report.notes)
    finally:
        read_only.close()
    upgraded = open_store(str(store_path))
    try:
        AgentRuntime(upgraded).create_project("first keyed write")
        report = verify(upgraded)
        assert report.verdict == Verdict.INTACT and report.keyed_from == old[-1] + 1
        assert f"records before {old[-1] + 1} predate the audit key and are protected by the hash chain only" \
            in report.notes
        sql(store_path, "UPDATE audit_log SET payload = '{}' WHERE seq = ?", old[1])
        assert verify(upgraded).failure == Failure.CONTENT_CHANGED
    finally:
        upgraded.close()


def test_a_write_that_cannot_get_its_key_is_refused_and_writes_nothing(
        store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentdesk.store.errors import StoreUnavailable

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the config folder should be")
    monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(blocker))
    store = open_store(str(store_path))
    try:
        with pytest.raises(StoreUnavailable, match=r"Nothing was written: The audit key .* cannot be"):
            AgentRuntime(store).create_project("unsigned")
        assert rows(store_path, "SELECT count(*) FROM projects") == [(0,)]
        assert rows(store_path, "SELECT count(*) FROM audit_log") == [(0,)]
    finally:
        store.close()


def test_copies_of_a_store_each_keep_their_own_anchored_history(store: Store, world: World, store_path: Path,
                                                                tmp_path: Path) -> None:
    """A copied file shares its id and key with the original; each location's history is anchored apart."""
    import shutil

    store.close()
    copies = [tmp_path / "copy-a.sqlite", tmp_path / "copy-b.sqlite", tmp_path / "untouched.sqlite"]
    for copy in copies:
        shutil.copyfile(store_path, copy)
    for n, copy in enumerate(copies[:2]):
        opened = open_store(str(copy))
        try:
            AgentRuntime(opened).create_project(f"only in copy {n}")  # the same seq, a different hash in each
        finally:
            opened.close()
    for copy in copies:
        opened = open_store(str(copy), read_only=True)
        try:
            report = verify(opened)
            assert report.verdict == Verdict.INTACT, (copy, report.reason)
        finally:
            opened.close()
    opened = open_store(str(copies[2]), read_only=True)
    try:
        assert any(note.startswith("the anchor is behind: no record is anchored") for note in verify(opened).notes)
    finally:
        opened.close()


def test_a_lost_key_refuses_the_next_write_instead_of_forking_the_chain(
        store: Store, world: World, store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26: with the key file gone, a new process's write used to make a new key from the next record,
    and `verify` then called an untouched store tampered. Now the write is refused with one sentence."""
    from agentdesk.store.audit import chain
    from agentdesk.store.errors import StoreUnavailable

    sid = _store_id(store)
    saved = keys.key_path(sid).read_bytes()
    keys.key_path(sid).unlink()
    monkeypatch.setattr(chain, "_KEYS", {})  # a new process: nothing loaded yet
    before = rows(store_path, "SELECT count(*) FROM audit_log")
    with pytest.raises(StoreUnavailable) as refused:
        AgentRuntime(store).create_project("would fork the chain")
    sentence = str(refused.value)
    assert sentence.startswith(f"Nothing was written: the audit key of store {sid} is missing")
    assert str(keys.key_path(sid)) in sentence and "\n" not in sentence
    assert not keys.key_path(sid).exists()
    assert rows(store_path, "SELECT count(*) FROM audit_log") == before
    assert rows(store_path, "SELECT count(*) FROM projects WHERE name = 'would fork the chain'") == [(0,)]
    keys.key_path(sid).write_bytes(saved)  # restored: writes go on, and the store verifies as before
    AgentRuntime(store).create_project("after the key came back")
    assert verify(store).verdict == Verdict.INTACT
