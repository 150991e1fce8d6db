"""Backup, restore and re-basing the anchors: the audited steps around the copies (docs/postgres.md, "Backups")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentdesk.store.audit import keys
from agentdesk.store.audit import restore as marks
from agentdesk.store.audit.chain import location_of, store_id_of
from agentdesk.store.audit.verify import Verdict, verify_chain
from agentdesk.store.backup import pg_copy, sqlite_copy
from agentdesk.store.backup.marker import Mark, Restored, actor_of, mark_backup, record_restore, require_owner
from agentdesk.store.errors import AuditChainBroken, InvalidInput
from agentdesk.store.persistence import sqlite
from agentdesk.store.persistence.database import Store, open_store, to_url
from agentdesk.store.persistence.postgres import engine as pg
from agentdesk.store.uow import UnitOfWork

Progress = sqlite_copy.Progress


@dataclass(frozen=True, slots=True)
class BackedUp:
    mark: Mark
    file: Path
    key_file: Path | None
    """PostgreSQL: the audit key's own file; None on SQLite (the key stays in the config folder)."""


def backup(store: Store, dest: Path, progress: Progress | None = None, *, busy_timeout_s: float = 5.0) -> BackedUp:
    """Mark the chain, then copy the store into `dest` (which must not exist yet)."""
    require_owner(store, "a backup")
    if dest.exists() or dest.is_symlink():
        raise InvalidInput(f"{dest} already exists; give the backup a new name.")
    if not dest.parent.is_dir():
        raise InvalidInput(f"The folder {dest.parent} does not exist.")
    mark = mark_backup(store)
    if store.is_postgres:
        return BackedUp(mark, dest, pg_copy.backup(store.url, dest, progress))
    path = store.path
    assert path is not None
    sqlite_copy.backup(path, dest, busy_timeout_s, progress)
    return BackedUp(mark, dest, None)


def restore(location: str, backup_file: Path, *, force: bool, busy_timeout_s: float, key: Path | None = None,
            progress: Progress | None = None) -> Restored:
    """Put `backup_file` back at `location` and record the restore in the chain.

    A store that exists is overwritten only with `force`: everything written since the backup is lost.
    """
    if not backup_file.is_file():
        raise InvalidInput(f"There is no backup file {backup_file}.")
    url = to_url(location)
    refuse = ("A store exists at {}; restoring replaces everything written since the backup was taken, so "
              "add --force if that is what you want.")
    if sqlite.is_sqlite_url(url):
        path = sqlite.path_of(url)
        assert path is not None
        if path.exists() and path.stat().st_size and not force:
            raise InvalidInput(refuse.format(path))
        sqlite_copy.restore(backup_file, path, busy_timeout_s, progress)
    else:
        if pg_copy.has_store(url) and not force:
            raise InvalidInput(refuse.format(pg.display(url)))
        pg_copy.restore(backup_file, url, key=key, replace=force, progress=progress)
    store = open_store(location, create=False, busy_timeout_s=busy_timeout_s)
    try:
        return record_restore(store)
    finally:
        store.close()


@dataclass(frozen=True, slots=True)
class Rebased:
    lines: int
    """Anchor lines moved out (0: there was nothing to re-base)."""
    archive: Path | None
    sentences: tuple[str, ...] = ()


def rebase_anchors(store: Store) -> Rebased:
    """Move this machine's anchor lines of the histories restores ended out of the anchor, with an audit record.

    Only what `verify` itself accepts as ended by a recorded restore is moved; a store that fails `verify`
    for any other reason is refused with its sentence.
    """
    require_owner(store, "re-basing the anchors")
    with store.reading() as session:
        store_id, where = store_id_of(session), location_of(session)
    anchor = keys.anchor_path(store_id) if store_id else None
    if store_id is None or anchor is None or not anchor.is_file():
        return Rebased(0, None)
    with store.reading() as session:  # every login's lines of this database on this machine (keys.database_of)
        report = verify_chain(session)
    if report.verdict == Verdict.TAMPERED:
        raise AuditChainBroken(f"Nothing was re-based: {report.reason}")
    if not report.gone:
        return Rebased(0, None)
    pairs = frozenset().union(*(g.pairs for g in report.gone))
    archive = marks.rebase_file(anchor, pairs, where)
    if archive is None:
        return Rebased(0, None)
    with UnitOfWork(store) as uow:
        uow.audit(actor_of(store), marks.REBASE_ACTION, marks.ENTITY, store_id, {
            "location": where, "lines": len(pairs), "archive": archive.name,
            "restores": [{"seq": g.restore.seq, "backup_id": g.restore.backup_id, "gone": g.count}
                         for g in report.gone]})
    return Rebased(len(pairs), archive, report.restored)
