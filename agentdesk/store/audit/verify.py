"""Checking a store's audit log: the chain, the signatures, the anchor, and the state it describes.

One walk in seq order, in batches, over the raw column values (a tampered column
may hold a blob or a number where text belongs: that is reported, never raised).
The first failure wins and becomes one sentence naming the record and how it
failed; what is merely not checkable (no key on this machine) or behind (an anchor
write failed after a commit) is said as such, never as tampering. docs/audit.md
has the threat model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, inspect, literal_column, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session
from sqlalchemy.types import BigInteger, Text

from agentdesk.store.audit import keys, restore
from agentdesk.store.audit.chain import GENESIS, location_of, record_hash, registered_keys, server_signs, store_id_of
from agentdesk.store.persistence.schema import AuditRow

TEXT_COLUMNS = ("actor", "action", "entity", "entity_id", "payload", "prev_hash", "hash")


class Verdict(StrEnum):
    INTACT = "intact"
    TAMPERED = "tampered"
    CANNOT_CHECK = "cannot check"


class Failure(StrEnum):
    """How the first bad record failed (the words `verify` uses)."""

    CONTENT_CHANGED = "content changed"
    REHASHED_WITHOUT_KEY = "re-hashed without the key"
    RECORD_MISSING = "record missing"
    RECORDS_MISSING_AFTER = "records missing"
    TABLE_REPLACED = "table replaced"
    REWRITTEN = "rewritten"
    ANCHOR_FORGED = "anchor forged"
    STATE_DISAGREES = "state disagrees"
    NO_KEY = "no key"
    UNKNOWN_KEY = "signed by a key this machine lacks"


@dataclass(frozen=True, slots=True)
class ChainReport:
    """What `verify` found: `reason` is the one sentence about the first failure (None when intact)."""

    records: int
    broken_seq: int | None
    reason: str | None
    verdict: Verdict = Verdict.INTACT
    failure: Failure | None = None
    notes: tuple[str, ...] = ()
    keyed_from: int | None = None
    anchored_seq: int | None = None
    row: str | None = None
    """For a state disagreement: the table row (e.g. "approval apr_…") that disagrees."""
    signers: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = ()
    """Each held key that signed records (its fingerprint) and the runs of records it signed, in order."""
    last_seq: int | None = None
    older_anchor_lines: int = 0
    """Anchor lines used in the older format, whose MAC does not cover their location."""
    restored: tuple[str, ...] = ()
    """One sentence per restore whose ended history this machine's anchor still holds (audit/restore.py)."""
    gone: tuple[restore.Gone, ...] = ()
    """Those restores' ended anchor lines, for `admin rebase-anchors`."""

    @property
    def ok(self) -> bool:
        return self.verdict == Verdict.INTACT


KEY_INFO = text("SELECT keyed_from FROM agentdesk_audit_key_info()")
MACS_OK = text("SELECT agentdesk_audit_macs_ok(:hashes, :macs, :logins)").bindparams(
    bindparam("hashes", type_=ARRAY(Text)), bindparam("macs", type_=ARRAY(Text)),
    bindparam("logins", type_=ARRAY(Text)))
ANCHORS_OK = text("SELECT agentdesk_audit_anchors_ok(:seqs, :hashes, :macs)").bindparams(
    bindparam("seqs", type_=ARRAY(BigInteger)), bindparam("hashes", type_=ARRAY(Text)),
    bindparam("macs", type_=ARRAY(Text)))
ANCHORS_OK_V2 = text("SELECT agentdesk_audit_anchors_ok_v2(:seqs, :hashes, :locations, :macs)").bindparams(
    bindparam("seqs", type_=ARRAY(BigInteger)), bindparam("hashes", type_=ARRAY(Text)),
    bindparam("locations", type_=ARRAY(Text)), bindparam("macs", type_=ARRAY(Text)))
"""Format-2 anchor lines (migration 0014): the MAC covers the line's location too."""
MAC_OK, LOGIN_CHANGED = "ok", "login"
"""Answers of `agentdesk_audit_macs_ok` besides 'record' (the MAC of the hash itself does not verify)."""


@dataclass(frozen=True, slots=True)
class ServerKey:
    """A PostgreSQL store's own audit key (migration 0008): only its first seq is known here.

    Each record's MAC (which covers its `db_login` too) is checked by `agentdesk_audit_macs_ok`,
    and each anchor line's by `agentdesk_audit_anchors_ok`; they answer verdicts, never MACs, so
    no key leaves the server and any machine (any viewer login) can verify.
    """

    keyed_from: int

    @staticmethod
    def of(session: Session) -> ServerKey | None:
        if not server_signs(session):
            return None
        with Session(session.get_bind()) as early:
            if early.execute(text("SELECT to_regproc('public.agentdesk_audit_key_info')")).scalar() is None:
                return None  # a store opened read-only below 0008: signed by machines' keys, as on SQLite
            found = early.execute(KEY_INFO).scalar()
        return None if found is None else ServerKey(int(found))

    def check(self, session: Session, rows: list[Any]) -> dict[int, str]:
        """seq -> the server's answer ('ok', 'record', 'login'), for the rows this key signs with a text MAC.

        The record's MAC covers its `db_login` too (migration 0008), so a login changed
        afterwards, even by a superuser, answers 'login'.
        """
        signed = [r for r in rows if int(r.seq) >= self.keyed_from and isinstance(getattr(r, "mac", None), str)
                  and isinstance(r.hash, str)]
        if not signed:
            return {}
        logins = [r.db_login if isinstance(r.db_login, str) else None for r in signed]
        answers = session.execute(MACS_OK, {"hashes": [r.hash for r in signed], "macs": [r.mac for r in signed],
                                            "logins": logins}).scalar_one()
        return {int(r.seq): str(ok) for r, ok in zip(signed, answers, strict=True)}

    def anchor_lines_ok(self, session: Session, entries: list[keys.AnchorEntry]) -> list[bool]:
        """Whether each anchor line's MAC is the one the server signed (lines before its key pass here)."""
        asked = [e for e in entries if e.seq >= self.keyed_from and e.mac is not None]
        older = [e for e in asked if e.version < 2]
        current = [e for e in asked if e.version >= 2]
        verdicts: dict[int, bool] = {}
        if older:
            answers = session.execute(ANCHORS_OK, {
                "seqs": [e.seq for e in older], "hashes": [e.hash for e in older],
                "macs": [e.mac for e in older]}).scalar_one()
            verdicts.update((id(e), bool(ok)) for e, ok in zip(older, answers, strict=True))
        if current:
            answers = session.execute(ANCHORS_OK_V2, {
                "seqs": [e.seq for e in current], "hashes": [e.hash for e in current],
                "locations": [e.location for e in current], "macs": [e.mac for e in current]}).scalar_one()
            verdicts.update((id(e), bool(ok)) for e, ok in zip(current, answers, strict=True))
        return [verdicts.get(id(e), True) for e in entries]


@dataclass
class _Walk:
    key: keys.AuditKey | None
    anchor: keys.Anchor | None
    server: ServerKey | None = None
    server_ok: dict[int, str] = field(default_factory=dict)
    """For the current batch: seq -> the server's answer for its MAC ('ok', 'record', 'login')."""
    records: int = 0
    prev: str = GENESIS
    last_seq: int | None = None
    first_seq: int | None = None
    anchored_matches: int = 0
    unverifiable_macs: int = 0
    signed: int = 0
    notes: list[str] = field(default_factory=list)
    present: set[int] = field(default_factory=set)
    """Anchored seqs found in the table."""
    registered: dict[str, int] = field(default_factory=dict)
    """Keys the store says sign it (fingerprint -> first record), `chain.register_key`."""
    runs: list[list[Any]] = field(default_factory=list)
    """[fingerprint or None (a key this machine lacks), first seq, last seq], in seq order."""

    def fail(self, seq: int | None, failure: Failure, sentence: str,
             verdict: Verdict = Verdict.TAMPERED) -> ChainReport:
        keyed_from = self.server.keyed_from if self.server else self.key.first_keyed if self.key else None
        signers: dict[str, list[tuple[int, int]]] = {}
        for fp, first, last in self.runs:
            if fp is not None:
                signers.setdefault(fp, []).append((first, last))
        return ChainReport(self.records, seq, sentence, verdict, failure, tuple(self.notes), keyed_from,
                           self.anchor.max_seq if self.anchor else None,
                           signers=tuple((fp, tuple(r)) for fp, r in signers.items()), last_seq=self.last_seq,
                           older_anchor_lines=self.anchor.older_lines if self.anchor else 0)

    def _signed_by(self, seq: int, fingerprint: str | None) -> None:
        if self.runs and self.runs[-1][0] == fingerprint and self.runs[-1][2] == self.last_seq:
            self.runs[-1][2] = seq
        else:
            self.runs.append([fingerprint, seq, seq])

    @property
    def unknown(self) -> list[tuple[int, int]]:
        return [(first, last) for fp, first, last in self.runs if fp is None]

    def step(self, row: Any) -> ChainReport | None:
        seq = int(row.seq)
        for name in TEXT_COLUMNS:
            value = getattr(row, name)
            if not isinstance(value, str):
                return self.fail(seq, Failure.CONTENT_CHANGED,
                                 f"Record {seq} was changed: its {name} column holds {_kind(value)} where "
                                 "text belongs (content changed).")
        if not isinstance(row.at, int | float) or isinstance(row.at, bool):
            return self.fail(seq, Failure.CONTENT_CHANGED,
                             f"Record {seq} was changed: its time column holds {_kind(row.at)} (content changed).")
        if row.prev_hash != self.prev:
            return self.fail(seq, Failure.RECORD_MISSING, self._broken_link(seq))
        digest = record_hash(row.prev_hash, row.at, row.actor, row.action, row.entity, row.entity_id,
                             row.payload)
        if digest != row.hash:
            return self.fail(seq, Failure.CONTENT_CHANGED,
                             f"Record {seq} was changed: its content does not match its hash (content changed).")
        failed = self._check_mac(seq, row)
        if failed is not None:
            return failed
        if self.anchor is not None and seq in self.anchor.heads:
            if not keys.same(self.anchor.heads[seq], row.hash):
                return self._anchor_mismatch(seq)
            self.anchored_matches += 1
            self.present.add(seq)
        self.prev, self.last_seq = row.hash, seq
        self.first_seq = seq if self.first_seq is None else self.first_seq
        self.records += 1
        return None

    def _broken_link(self, seq: int) -> str:
        if self.last_seq is None:
            return (f"Records before {seq} are missing: record {seq} does not follow the start of the log "
                    "(record missing).")
        first, last = self.last_seq + 1, seq - 1
        gap = "" if first > last else f" (record {first} is gone)" if first == last else \
            f" (records {first} to {last} are gone)"
        return (f"Record {seq} does not follow record {self.last_seq}: a record between them is missing or "
                f"was changed{gap} (record missing).")

    def _check_mac(self, seq: int, row: Any) -> ChainReport | None:
        mac = getattr(row, "mac", None)
        if mac is not None and not isinstance(mac, str):
            return self.fail(seq, Failure.CONTENT_CHANGED,
                             f"Record {seq} was changed: its HMAC column holds {_kind(mac)} (content changed).")
        if self.server is not None and seq >= self.server.keyed_from:
            return self._check_server_mac(seq, mac)
        if self.key is None:
            self.unverifiable_macs += mac is not None
            return None
        first = self.key.first_keyed
        if mac is None and seq < first:
            return None
        if mac is None:
            return self.fail(seq, Failure.REHASHED_WITHOUT_KEY,
                             f"Record {seq} was re-hashed without the key: it carries no HMAC although every "
                             f"record from {first} on is signed.")
        signer = self.key.signer(row.hash, mac)
        if signer is not None and seq < signer.keyed_from:
            return self.fail(seq, Failure.RECORD_MISSING,
                             f"Record {seq} was renumbered: it is signed, but records before "
                             f"{signer.keyed_from} predate the audit key (record missing at its old number).")
        if signer is None:
            return self._unknown_mac(seq)
        self._signed_by(seq, signer.fingerprint)
        self.signed += 1
        return None

    def _unknown_mac(self, seq: int) -> ChainReport | None:
        """A MAC no held key made: another machine's key the store names, or a record re-hashed without the key.

        It is another machine's only when the store registers a key this machine lacks that signs from
        this record or before, and this machine did not anchor the record (what it anchored it signed
        itself). Then the record is "cannot check" (exit 7), named with the others at the end.
        """
        held = {k.fingerprint for k in self.key.known} if self.key else set()
        lacking = [first for fp, first in self.registered.items() if fp not in held and first <= seq]
        anchored = self.anchor is not None and seq in self.anchor.heads
        if lacking and not anchored:
            self._signed_by(seq, None)
            return None
        hint = "" if anchored or lacking else (
            " (if another machine wrote it with a key of its own, import that key there with "
            "`agentdesk audit key export` and here with `agentdesk audit key import FILE`)")
        return self.fail(seq, Failure.REHASHED_WITHOUT_KEY,
                         f"Record {seq} was re-hashed without the key: its hash matches its content but "
                         f"its HMAC does not{hint}.")

    def _check_server_mac(self, seq: int, mac: str | None) -> ChainReport | None:
        if mac is None:
            return self.fail(seq, Failure.REHASHED_WITHOUT_KEY,
                             f"Record {seq} was re-hashed without the key: it carries no HMAC although the server "
                             f"signs every record from {self.server.keyed_from if self.server else 0} on.")
        answer = self.server_ok.get(seq)
        if answer == LOGIN_CHANGED:
            return self.fail(seq, Failure.CONTENT_CHANGED,
                             f"Record {seq} was changed: its database login (db_login) is not the login the "
                             "server signed it for, so who did it was rewritten (content changed).")
        if answer != MAC_OK:
            return self.fail(seq, Failure.REHASHED_WITHOUT_KEY,
                             f"Record {seq} was re-hashed without the key: its hash matches its content but "
                             "the server says its HMAC does not.")
        self.signed += 1
        return None

    def _anchor_mismatch(self, seq: int) -> ChainReport:
        assert self.anchor is not None
        if self.anchored_matches == 0:
            return self.fail(seq, Failure.TABLE_REPLACED,
                             f"The audit table was replaced: record {seq} is not the record {seq} the anchor "
                             f"({self.anchor.where}) saw, so the table holds a different history (table "
                             "replaced).")
        return self.fail(seq, Failure.REWRITTEN,
                         f"Record {seq} was rewritten by someone holding the key: its hash differs from the "
                         f"one the anchor ({self.anchor.where}) saw.")

    def finish(self) -> ChainReport:
        anchor, last = self.anchor, self.last_seq or 0
        if anchor is not None and self.records:
            absent = [seq for seq in anchor.heads if seq <= last and seq not in self.present]
            if absent:
                seq = min(absent)
                return self.fail(seq, Failure.RECORD_MISSING,
                                 f"Record {seq} is missing: the anchor ({anchor.where}) saw it, but the table has "
                                 "no record with that number (deleted or renumbered; record missing).")
        if anchor is not None and anchor.max_seq > last:
            if self.records == 0:
                return self.fail(None, Failure.TABLE_REPLACED,
                                 f"All {anchor.max_seq:,} audit records are missing: the table is empty but the "
                                 f"anchor saw the log up to record {anchor.max_seq} (table emptied or replaced).")
            return self.fail(last + 1, Failure.RECORDS_MISSING_AFTER,
                             f"Records are missing after {last}: the anchor ({anchor.where}) saw the log up to "
                             f"record {anchor.max_seq} (records missing after {last}).")
        if anchor is not None and anchor.forged_lines:
            return self.fail(None, Failure.ANCHOR_FORGED,
                             f"The anchor {anchor.where} was edited: {anchor.forged_lines} of its lines carry an "
                             "HMAC that does not verify under the store's key"
                             f"{' (the server checked them)' if self.server is not None else ''}.")
        self._add_notes(last)
        if self.unknown:
            return self._lacking_key()
        if self.unverifiable_macs:
            return self.fail(None, Failure.NO_KEY, "", Verdict.CANNOT_CHECK)
        return self.fail(None, Failure.NO_KEY, "", Verdict.INTACT)

    def _lacking_key(self) -> ChainReport:
        runs = self.unknown
        count = sum(last - first + 1 for first, last in runs)
        held = ", ".join(k.fingerprint for k in self.key.known) if self.key else "none"
        named = ranges_text(runs)
        return self.fail(runs[0][0], Failure.UNKNOWN_KEY, (
            f"{'Record' if count == 1 else 'Records'} {named} {'is' if count == 1 else 'are'} signed by a key "
            f"this machine does not hold (it holds {held}), so {'its signature' if count == 1 else 'their signatures'}"
            f" cannot be checked: export that key on the machine that wrote {'it' if count == 1 else 'them'} "
            "(`agentdesk audit key export`) and import it here (`agentdesk audit key import FILE`), unless "
            f"{'it was' if count == 1 else 'they were'} re-hashed without the key; the hash chain of "
            f"{self.records:,} records holds."), Verdict.CANNOT_CHECK)

    def _add_notes(self, last: int) -> None:
        key, anchor = self.key, self.anchor
        if self.server is not None and self.first_seq is not None and self.first_seq < self.server.keyed_from:
            self.notes.append(f"records before {self.server.keyed_from} predate the server's audit key and are "
                              "checked with this machine's key where it has one")
        elif key is not None and self.first_seq is not None and self.first_seq < key.first_keyed:
            self.notes.append(f"records before {key.first_keyed} predate the audit key and are protected by "
                              "the hash chain only")
        if anchor is not None and anchor.unreadable_lines:
            self.notes.append(f"{anchor.unreadable_lines} unreadable lines in the anchor were skipped")
        if self.records and (anchor is None or anchor.max_seq < last) and self.signed:
            since = "no record is anchored" if anchor is None or not anchor.heads else \
                f"records after {anchor.max_seq} are not anchored"
            self.notes.append(f"the anchor is behind: {since} (an anchor write failed after its commit, or "
                              "they were written on another machine); truncation past it cannot be seen")


DASH = "\u2013"


def ranges_text(runs: list[tuple[int, int]] | tuple[tuple[int, int], ...], open_from: int | None = None) -> str:
    """"1-21, 30 and 34-40" (with an en dash); a run reaching `open_from` (the last record) is written open:
    "22-" (the words `verify` uses for a store signed by two keys)."""
    parts = []
    for first, last in runs:
        if open_from is not None and last == open_from and first != last:
            parts.append(f"{first}{DASH}")
        else:
            parts.append(str(first) if first == last else f"{first}{DASH}{last}")
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _kind(value: object) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return f"binary data ({len(bytes(value)):,} bytes)"
    if value is None:
        return "nothing (NULL)"
    return f"a {type(value).__name__}"


def _columns(session: Session) -> list[Any]:
    """The audit columns this store has (a store opened read-only below 0007 has no `mac`)."""
    names = {c["name"] for c in inspect(session.connection()).get_columns(AuditRow.__tablename__)}
    table = AuditRow.__table__
    return [c for c in table.columns if c.name in names]


def _load_key(store_id: str | None, notes: list[str]) -> keys.AuditKey | None:
    if store_id is None:
        return None
    try:
        return keys.load_key(store_id)
    except keys.KeyUnavailable as exc:
        notes.append(str(exc).rstrip("."))
        return None


def _anchor_first(session: Session, anchor_file: Path | None, use_anchor: bool,
                  server: ServerKey | None = None,
                  ) -> tuple[str | None, keys.AuditKey | None, keys.Anchor | None, list[str]]:
    """The store id, key and anchor, read *before* `session` takes its snapshot.

    Writers append to the anchor after their commit, so every head read now is covered by
    a snapshot taken later; reading the anchor after the snapshot would see heads of commits
    the snapshot predates and report them as missing records (found by the kill -9 test,
    whose writers keep committing while `verify` runs). The id is read on its own
    short connection for the same reason.
    """
    notes: list[str] = []
    with Session(session.get_bind()) as early:
        store_id = store_id_of(early)
        key = _load_key(store_id, notes) if server is None or server.keyed_from > 1 else None
        # The server signs anchor lines from its key's first seq on and checks them (their MACs stay there);
        # older lines were signed by a machine's key and are checked with it where this machine has it.
        line_key = None if server is not None else key
        lines_ok = None if server is None else _server_lines(server, early, key)
        anchor: keys.Anchor | None = None
        if anchor_file is not None:
            anchor = keys.read_anchor(anchor_file, line_key, check_lines=lines_ok)
            if anchor is None:
                raise FileNotFoundError(anchor_file)
        elif use_anchor and store_id is not None:
            anchor = keys.read_anchor(keys.anchor_path(store_id), line_key, location_of(session),
                                      check_lines=lines_ok)
    return store_id, key, anchor, notes


def _server_lines(server: ServerKey, session: Session, key: keys.AuditKey | None,
                  ) -> Callable[[list[keys.AnchorEntry]], list[bool]]:
    """Checks anchor lines: the server's from its key's first seq, this machine's key before it."""

    def check(entries: list[keys.AnchorEntry]) -> list[bool]:
        by_server = server.anchor_lines_ok(session, entries)
        # A format-2 line this machine's key signs (a copy of the store on SQLite, whose lines name their own
        # location) is genuine though not the server's.
        return [(ok or (key is not None and e.version >= 2 and e.mac is not None and key.line_ok(e)))
                if e.seq >= server.keyed_from or key is None or e.mac is None
                else key.line_ok(e) for e, ok in zip(entries, by_server, strict=True)]

    return check


def verify_chain(session: Session, batch: int = 5000, *, anchor_file: Path | None = None,
                 use_anchor: bool = True) -> ChainReport:
    """Walk the whole chain in order and stop at the first record that does not hold.

    The key and anchor are found by the store's id in the config folder; `anchor_file`
    (an `audit export` or a copied anchor) replaces the local anchor.
    """
    server = ServerKey.of(session)
    store_id, key, anchor, notes = _anchor_first(session, anchor_file, use_anchor, server)
    registered = registered_keys(session) if key is not None and server is None else {}
    report = _walk_log(session, _Walk(key, anchor, server, notes=list(notes), registered=registered), server, batch)
    if report.verdict == Verdict.TAMPERED and report.failure in RESTORE_LOOKS_LIKE and anchor is not None:
        report = _after_restore(session, report, key, anchor, server, notes, registered, batch)
    if report.verdict == Verdict.TAMPERED or report.failure == Failure.UNKNOWN_KEY:
        return report
    if key is None and server is None and report.records:
        return _no_key(report, session, store_id)
    return replace(report, failure=None, reason=None)


RESTORE_LOOKS_LIKE = (Failure.RECORDS_MISSING_AFTER, Failure.REWRITTEN, Failure.TABLE_REPLACED, Failure.RECORD_MISSING)
"""How a legitimate restore reads against an anchor that saw the later history (audit/restore.py)."""


def _walk_log(session: Session, walk: _Walk, server: ServerKey | None, batch: int) -> ChainReport:
    columns = _columns(session)
    if server is not None:  # PostgreSQL's db_login (0005): the server's record MACs cover it (0008)
        columns.append(literal_column("db_login"))
    last_seq: int | None = None
    while True:
        query = select(*columns).order_by(AuditRow.seq).limit(batch)
        if last_seq is not None:
            query = query.where(AuditRow.seq > last_seq)
        rows = session.execute(query).all()
        if not rows:
            break
        if server is not None:
            walk.server_ok = server.check(session, list(rows))
        for row in rows:
            failed = walk.step(row)
            if failed is not None:
                return failed
            last_seq = int(row.seq)
    return walk.finish()


def _after_restore(session: Session, failed: ChainReport, key: keys.AuditKey | None, anchor: keys.Anchor,
                   server: ServerKey | None, notes: list[str], registered: dict[str, int],
                   batch: int) -> ChainReport:
    """The walk again without the anchor lines a restore recorded in the chain ended; `failed` if none did.

    The second walk checks every record, the restore's own record included, against the rest of the
    anchor: a truncation after the restore, or one without a restore record, still fails.
    """
    found = restore.restores(session)
    if not found:
        return failed
    rebased, gone = restore.split(anchor, found, restore.hashes_from(session, found[0].head + 1))
    if not gone:
        return failed
    report = _walk_log(session, _Walk(key, rebased, server, notes=list(notes), registered=registered), server,
                       batch)
    if report.verdict == Verdict.TAMPERED:
        return report
    return replace(report, restored=tuple(g.sentence() for g in gone), gone=tuple(gone))


def _no_key(report: ChainReport, session: Session, store_id: str | None) -> ChainReport:
    """Signed records but no key here: a copy from another machine, or its identity was changed."""
    location = location_of(session)
    others = [sid for sid in keys.stores_anchored_at(location) if sid != store_id]
    if others:
        return replace(report, verdict=Verdict.TAMPERED, failure=Failure.TABLE_REPLACED, reason=(
            f"The store's identity was changed: it is now {store_id or 'missing'}, but the anchor of store "
            f"{others[0]} was written from this location, and this machine has no key for the new identity "
            "(table replaced)."))
    if report.verdict == Verdict.INTACT:
        return replace(report, failure=None, reason=None, notes=(
            *report.notes, "no record is signed: the store predates keyed audit and has not been written since"))
    where = keys.key_path(store_id) if store_id else keys.audit_dir()
    return replace(report, reason=(
        f"The signatures cannot be checked: this machine has no audit key for store {store_id or '(no id)'} "
        f"(looked in {where}); the hash chain of {report.records:,} records holds."))


def verify_store(session: Session, *, anchor_file: Path | None = None) -> ChainReport:
    """The chain, its signatures and anchor, then the state tables against what the log says.

    State is compared unless the log itself was found tampered (then it describes nothing
    trustworthy); a state disagreement is tampering named by its row.
    """
    from agentdesk.store.audit.state import check_state

    # On its own connection: `session` must not take its snapshot before the anchor is read (_anchor_first).
    if AuditRow.__tablename__ not in inspect(session.get_bind()).get_table_names():
        return _table_gone(session)
    report = verify_chain(session, anchor_file=anchor_file)
    if report.verdict == Verdict.TAMPERED:
        return report
    found = check_state(session)
    if found is None:
        return report
    return replace(report, verdict=Verdict.TAMPERED, failure=Failure.STATE_DISAGREES, reason=found.sentence,
                   row=found.row)


def _table_gone(session: Session) -> ChainReport:
    store_id = store_id_of(session)
    anchor = keys.read_anchor(keys.anchor_path(store_id), None, location_of(session)) if store_id else None
    if anchor is not None and anchor.heads:
        return ChainReport(0, None, f"The audit table is gone: the anchor ({anchor.where}) saw the log up to "
                                    f"record {anchor.max_seq} (table replaced).", Verdict.TAMPERED,
                           Failure.TABLE_REPLACED, anchored_seq=anchor.max_seq)
    return ChainReport(0, None, "The store has no audit table, and this machine holds no anchor for it, so "
                                "there is nothing to check it against.", Verdict.CANNOT_CHECK)
