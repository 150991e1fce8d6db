"""Hash-chained, keyed audit records, in the spirit of lensagent's event log.

Every record's hash covers its own fields and the previous record's hash, so
editing or deleting any record breaks the chain from that point on. Every record
also carries `mac`, an HMAC of its hash under the store's audit key (on SQLite kept
outside the database, `store/audit/keys.py`; on PostgreSQL kept by the server, which
appends and signs through `agentdesk_audit_append`, migration 0008): recomputing
the hashes after an edit does not produce valid MACs without the key. After each audited commit the new chain head
goes to the store's anchor file, so dropping the last records, or the whole
table, is noticed too. `store.audit.verify` checks all three.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from typing import Any

from sqlalchemy import insert, select, text
from sqlalchemy.orm import Session

from agentdesk.store.audit import keys
from agentdesk.store.errors import StoreUnavailable
from agentdesk.store.persistence.schema import AuditRow, MetaRow

GENESIS = "0" * 64
STORE_ID_KEY = "store_id"
log = logging.getLogger("agentdesk.audit")
_KEYS: dict[tuple[str, str], keys.AuditKey] = {}
"""Keys this process already loaded, by (config folder, store id): one file read per process."""


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_blob)


def _blob(value: object) -> object:
    """A column that should hold text but holds bytes (a tampered row) still hashes, as a marked hex."""
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$bytes": bytes(value).hex()}
    return repr(value)


def record_hash(prev_hash: str, at: float, actor: str, action: str, entity: str,
                entity_id: str, payload: str) -> str:
    body = canonical_json([prev_hash, repr(at), actor, action, entity, entity_id, payload])
    return hashlib.sha256(body.encode("utf-8", "surrogateescape")).hexdigest()


def store_id_of(session: Session, *, create: bool = False) -> str | None:
    """The store's identity (`agentdesk_meta.store_id`, set by migration 0007); made if asked and missing."""
    found = session.execute(select(MetaRow.value).where(MetaRow.key == STORE_ID_KEY)).scalar()
    if found is None and create:
        found = uuid.uuid4().hex
        session.add(MetaRow(key=STORE_ID_KEY, value=found))
        session.flush()
    return None if found is None else str(found)


def signing_key(store_id: str, next_seq: int, session: Session | None = None) -> keys.AuditKey:
    """The key to sign with: loaded once per process, created on the store's first keyed write.

    With `session`, a store whose records are already signed never gets a new key: its key
    is lost (or kept elsewhere), and a second key would fork the log into two histories
    that `verify` can no longer tell from tampering (issue 26). The write is refused instead.
    """
    slot = (str(keys.config_dir()), store_id)
    key = _KEYS.get(slot)
    if key is None:
        try:
            key = keys.load_key(store_id)
            if key is None and session is not None:
                _refuse_second_key(session, store_id)
                key = keys.create_key(store_id, keyed_from=next_seq)
                register_key(session, key.fingerprint, key.keyed_from)
            key = key or keys.create_key(store_id, keyed_from=next_seq)
        except keys.KeyUnavailable as exc:
            raise StoreUnavailable(f"Nothing was written: {exc} The audit key signs every record, so a "
                                   "write without it is refused.") from exc
        _KEYS[slot] = key
    return key


KEY_META_PREFIX = "audit_key."


def register_key(session: Session, fingerprint: str, keyed_from: int) -> None:
    """Say in the store that a key with this fingerprint signs it from `keyed_from` on (in the same transaction).

    `verify` on a machine that does not hold that key then reports the records it cannot check as signed
    by another machine's key (exit 7) instead of re-hashed (exit 6): two config folders that made a key
    each before either had signed (issue 26). A registration is not proof (whoever can write the file can
    add one); records this machine anchored are always checked with its own keys (docs/audit.md).
    """
    name = f"{KEY_META_PREFIX}{fingerprint}"
    if session.get(MetaRow, name) is None:
        session.add(MetaRow(key=name, value=json.dumps({"keyed_from": keyed_from})))
        session.flush()


def registered_keys(session: Session) -> dict[str, int]:
    """fingerprint -> keyed_from, for every key the store says signs it (see `register_key`)."""
    found: dict[str, int] = {}
    for name, value in session.execute(select(MetaRow.key, MetaRow.value)
                                       .where(MetaRow.key.startswith(KEY_META_PREFIX, autoescape=True))):
        try:
            keyed_from = json.loads(value).get("keyed_from")
        except (ValueError, TypeError, AttributeError):
            continue
        if type(keyed_from) is int:
            found[str(name)[len(KEY_META_PREFIX):]] = keyed_from
    return found


def _refuse_second_key(session: Session, store_id: str) -> None:
    """Signed records but no key here: refuse, saying where the key belongs (never make a new one)."""
    signed = session.execute(select(AuditRow.seq).where(AuditRow.mac.is_not(None)).order_by(AuditRow.seq)
                             .limit(1)).scalar()
    if signed is None:
        return
    where = str(keys.key_path(store_id)) + (" and the OS keyring" if keys._keyring() is not None else "")
    raise StoreUnavailable(
        f"Nothing was written: the audit key of store {store_id} is missing (looked in {where}), but its "
        f"records from {signed} on are signed with it and a new key would fork the log; restore it with "
        f"`agentdesk audit key import FILE` (a file `agentdesk audit key export` wrote on the machine that wrote "
        f"the store, or a backup of {keys.key_path(store_id)}).")


SERVER_APPEND = text("SELECT seq, hash, anchor_mac FROM agentdesk_audit_append_v2(:at, :actor, :action, :entity, "
                     ":entity_id, :payload, :location)")
"""PostgreSQL (migration 0008): the server takes the tail, hashes, signs and inserts; no local key is needed.
The anchor MAC it answers is of format 2, over the location too (migration 0014)."""
SERVER_HEAD = text("SELECT seq, hash, anchor_mac FROM agentdesk_audit_head_v2(:location)")
SERVER_SIGNED = "the server (agentdesk_audit_key)"
"""The `where` of the stand-in key a server-signed store's anchor lines name (its secret is empty, never used)."""


def server_signs(session: Session) -> bool:
    """True on PostgreSQL: the store signs its own audit (every PostgreSQL store is migrated to 0008 at open)."""
    bind: Any = session.get_bind()
    return str(getattr(bind, "engine", bind).url.get_backend_name()) == "postgresql"  # the URL: tests fake dialects


class AuditAppender:
    """Appends signed records inside one transaction; remembers the tail between appends.

    On PostgreSQL the record is appended by `agentdesk_audit_append` (the server signs it
    with a key no login can read); on SQLite it is hashed and signed here with the key
    kept beside the user's config. After the transaction commits, call `anchor()` to
    write the new head to the anchor file (the unit of work does).
    """

    def __init__(self, session: Session) -> None:
        self._session = session
        self._tail: str | None = None
        self._key: keys.AuditKey | None = None
        self._head: tuple[int, str] | None = None
        self._anchor_mac: str | None = None
        self._where = ""

    def _server_key(self) -> None:
        if self._key is None:
            store_id = store_id_of(self._session, create=False) or ""
            self._key = keys.AuditKey(store_id, b"", 0, SERVER_SIGNED)
            self._where = location_of(self._session)

    def _append_on_server(self, actor: str, action: str, entity: str, entity_id: str, payload: str,
                          at: float) -> str:
        # No autoflush: a row added but not yet flushed (a new approval a rule may still decide) must reach
        # the server as one INSERT, since operators may not UPDATE an approval's decision columns.
        with self._session.no_autoflush:
            self._server_key()
            row = self._session.execute(SERVER_APPEND, {
                "at": repr(at), "actor": actor, "action": action, "entity": entity, "entity_id": entity_id,
                "payload": payload, "location": self._where}).one()
        self._head, self._anchor_mac = (int(row.seq), str(row.hash)), str(row.anchor_mac)
        return str(row.hash)

    def adopt_server_head(self) -> None:
        """A server function (agentdesk_decide, …) appended records in this transaction: anchor its head."""
        self._server_key()
        row = self._session.execute(SERVER_HEAD, {"location": self._where}).first()
        if row is not None:
            self._head, self._anchor_mac = (int(row.seq), str(row.hash)), str(row.anchor_mac)

    def append(self, actor: str, action: str, entity: str, entity_id: str,
               payload: dict[str, Any], at: float | None = None) -> str:
        at = time.time() if at is None else at
        if server_signs(self._session):
            return self._append_on_server(actor, action, entity, entity_id, canonical_json(payload), at)
        if self._tail is None or self._key is None:
            last = self._session.execute(
                select(AuditRow.seq, AuditRow.hash).order_by(AuditRow.seq.desc()).limit(1)).first()
            self._tail = GENESIS if last is None else str(last.hash)
            store_id = store_id_of(self._session, create=True)
            assert store_id is not None
            self._key = signing_key(store_id, 1 if last is None else int(last.seq) + 1, self._session)
            self._where = location_of(self._session)
        body = canonical_json(payload)
        digest = record_hash(self._tail, at, actor, action, entity, entity_id, body)
        seq = self._session.execute(insert(AuditRow).values(
            at=at, actor=actor, action=action, entity=entity, entity_id=entity_id,
            payload=body, prev_hash=self._tail, hash=digest, mac=self._key.mac(digest))
            .returning(AuditRow.seq)).scalar_one()
        self._tail = digest
        self._head = (int(seq), digest)
        return digest

    @property
    def head(self) -> tuple[int, str] | None:
        """(seq, hash) of the last record appended here, None if nothing was."""
        return self._head

    def anchor(self) -> bool:
        """Write the head to the anchor file, after the commit; never raises.

        The commit already happened, so a failure here must not look like a failed
        write (a caller would retry and write twice). It is logged as a warning and
        `verify` later reports the anchor as behind, which is not tampering.
        """
        if self._head is None or self._key is None:
            return True
        seq, digest = self._head
        try:
            keys.append_anchor(self._key, seq, digest, self._where, self._anchor_mac)
        except Exception as exc:  # after commit nothing may escape; said in the log
            log.warning("agentdesk: the audit anchor %s could not be written (%s); record %d is committed "
                        "but not anchored, and `agentdesk verify` will report the anchor as behind.",
                        keys.anchor_path(self._key.store_id), exc, seq)
            return False
        return True


def location_of(session: Session) -> str:
    """The database URL (password hidden): written into anchor lines, found again by `verify`."""
    try:
        bind: Any = session.get_bind()
        return str(getattr(bind, "engine", bind).url.render_as_string(hide_password=True))
    except Exception:  # the location is only a hint for people reading the file
        return ""
