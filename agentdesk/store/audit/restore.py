"""Telling a restore from a truncation: the backup's marker, the restore's record, and re-basing the anchor.

A restored store holds fewer records than the anchors of the machines that wrote after the
backup saw. Without more, `verify` cannot tell that from someone deleting the last records,
and says "Records are missing after N" for ever. So a backup and a restore leave signed
records in the chain itself:

- `store.backup` (appended by `agentdesk admin backup` just before the copy is taken): the
  backup's id and time. It is inside the copy.
- `store.restore` (appended by `agentdesk admin restore` right after the copy is back): the
  backup's id, time and marker seq, and `head`, the last record the copy held. It follows `head`
  in the chain (its number may be higher: PostgreSQL's sequences are not rolled back).

`verify` accepts the anchor's later lines as "gone with the restore" only when the chain holds a
`store.restore` record, signed like any other (the key, or on PostgreSQL the server, signs it: no
level below the owner may append it), whose `head` comes before it and whose backup's
marker is in the chain with the same id. A truncation without that record (a deleted tail, a
tail deleted back to a marker) still fails as before. `agentdesk admin rebase-anchors` (the
owner) then moves the gone lines out of this machine's anchor into a file beside it, with an
`audit.rebase` record, and `verify` is clean again.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentdesk.store.audit import keys
from agentdesk.store.persistence.schema import AuditRow

BACKUP_ACTION = "store.backup"
RESTORE_ACTION = "store.restore"
REBASE_ACTION = "audit.rebase"
ENTITY = "store"


@dataclass(frozen=True, slots=True)
class Restore:
    """A `store.restore` record whose backup marker is in the chain: record `seq`, restoring up to `head`."""

    seq: int
    head: int
    backup_id: str
    taken_at: float


@dataclass(frozen=True, slots=True)
class Gone:
    """What one restore ended on this anchor: the anchored records after its backup's last one."""

    restore: Restore
    anchored_up_to: int
    pairs: frozenset[tuple[int, str]]
    """The (seq, hash) anchor lines of the history the restore ended (what `rebase-anchors` moves out)."""

    @property
    def count(self) -> int:
        return self.anchored_up_to - self.restore.head

    def sentence(self) -> str:
        taken = when(self.restore.taken_at)
        return (f"restored from a backup taken at {taken} (record {self.restore.head}); {self.count:,} anchored "
                f"record{'s' if self.count != 1 else ''} after it {'are' if self.count != 1 else 'is'} gone "
                "(the store's owner re-bases this machine's anchor with `agentdesk admin rebase-anchors`)")


def when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _payload(text: object) -> dict[str, object] | None:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def restores(session: Session) -> list[Restore]:
    """The chain's restore records that name a backup marker it holds, oldest first (usually none).

    Only the shape is checked here; the walk that uses them checks every record's hash and signature.
    """
    found: list[Restore] = []
    rows = session.execute(select(AuditRow.seq, AuditRow.payload).where(AuditRow.action == RESTORE_ACTION)
                           .order_by(AuditRow.seq)).all()
    for seq, text in rows:
        data = _payload(text)
        if data is None:
            continue
        head, backup_seq, backup_id, taken_at = (data.get("head"), data.get("backup_seq"), data.get("backup_id"),
                                                 data.get("taken_at"))
        if (type(head) is not int or head >= int(seq) or type(backup_seq) is not int or backup_seq > head
                or not isinstance(backup_id, str) or not isinstance(taken_at, int | float)):
            continue
        marker = session.execute(select(AuditRow.action, AuditRow.payload).where(AuditRow.seq == backup_seq)).first()
        marked = _payload(marker.payload) if marker is not None and marker.action == BACKUP_ACTION else None
        if marked is None or marked.get("backup_id") != backup_id:
            continue
        found.append(Restore(int(seq), head, backup_id, float(taken_at)))
    return found


def hashes_from(session: Session, first: int) -> dict[int, str]:
    """seq -> hash of every record from `first` on (the restored history an anchor's later lines are held to)."""
    rows = session.execute(select(AuditRow.seq, AuditRow.hash).where(AuditRow.seq >= first)).all()
    return {int(seq): str(digest) for seq, digest in rows}


def split(anchor: keys.Anchor, found: list[Restore], table: Mapping[int, str],
          ) -> tuple[keys.Anchor, list[Gone]]:
    """The anchor without the lines of the histories the restores ended, and what each one ended.

    For a restore whose copy ended at record H, the ended history is every line with seq > H written
    (in file order) before the first line of the restored history (a line whose hash is the table's
    for its seq). Lines up to H are the shared history and stay, to be checked as ever; so do lines
    after.
    """
    lines = list(anchor.lines)
    gone: list[Gone] = []
    for restore in found:
        start = next((i for i, (seq, digest) in enumerate(lines)
                      if seq > restore.head and table.get(seq) == digest), len(lines))
        old = [i for i, (seq, _) in enumerate(lines[:start]) if seq > restore.head]
        if not old:
            continue
        pairs = frozenset(lines[i] for i in old)
        gone.append(Gone(restore, max(seq for seq, _ in pairs), pairs))
        dropped = set(old)
        lines = [line for i, line in enumerate(lines) if i not in dropped]
    heads: dict[int, str] = {}
    for seq, digest in lines:
        heads.setdefault(seq, digest)
    return replace(anchor, heads=heads, lines=tuple(lines)), gone


def rebase_file(path: Path, pairs: frozenset[tuple[int, str]], location: str) -> Path | None:
    """Move the lines in `pairs` of `location`'s database (any login) from the anchor at `path` into
    `<path>.before-restore-<time>`; None if none were there.

    The kept lines replace the file atomically (a temp file, then rename), both 0600. A line another
    process appends between the read and the rename is lost from the anchor, which `verify` reports as
    "the anchor is behind" (never as tampering); run it while nothing writes if that matters.
    """
    kept: list[bytes] = []
    moved: list[bytes] = []
    with open(path, "rb") as handle:
        for raw in handle:
            entry = keys._entry(raw)
            if (entry is not None and entry is not keys.SKIP and (entry.seq, entry.hash) in pairs
                    and keys.database_of(entry.location) == keys.database_of(location)):
                moved.append(raw)
            else:
                kept.append(raw)
    if not moved:
        return None
    archive = path.with_name(f"{path.name}.before-restore-{time.strftime('%Y%m%dT%H%M%S')}")
    _write_private(archive, moved)
    temp = path.with_name(f".{path.name}.rebase-{os.getpid()}")
    _write_private(temp, kept)
    os.replace(temp, path)
    return archive


def _write_private(path: Path, lines: list[bytes]) -> None:
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as handle:
        handle.write(b"".join(lines))
        handle.flush()
        os.fsync(handle.fileno())
