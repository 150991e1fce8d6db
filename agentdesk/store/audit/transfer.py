"""Moving a store's audit key to another machine or account: `agentdesk audit key export` / `import`.

The exported file (JSON, written `0600`) names the store it belongs to and carries every key this
machine holds for it, the signing key first: {"type": "agentdesk-audit-key", "format": 1, "store_id",
"exported_at", "keys": [{"secret", "keyed_from", "created_at", "fingerprint"}, ...]}. A key file
itself (`<config>/audit/<store_id>.key`, e.g. from a backup) is accepted by `import` too.

Import refuses, in one sentence each, a file for another store and a key that verifies none of the
store's signed records. It never replaces a key this machine holds: a key it lacks is added *beside*
the ones it has (they go on verifying their records, and the signing key stays the one that signs
unless `--sign` is given), so a store written from two config folders that each made a key verifies
on both once each imported the other's (docs/audit.md, "Two keys").
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentdesk.store.audit import chain, keys
from agentdesk.store.errors import InvalidInput
from agentdesk.store.persistence.schema import AuditRow
from agentdesk.store.validation import require_regular_file

KEY_FORMAT = "agentdesk-audit-key"
KEY_FILE_LIMIT = 1 << 20
"""A key file is well under a kilobyte (a few keys); a larger file is not one."""
BATCH = 5000


class KeyRefused(InvalidInput):
    """The key file cannot be imported for this store; the sentence says why (exit 2)."""


def _store(session: Session) -> str:
    if chain.server_signs(session):
        raise KeyRefused("This store is on PostgreSQL, whose server holds the audit key and signs every record "
                         "itself: there is no key on this machine to move (docs/audit.md).")
    store_id = chain.store_id_of(session)
    if store_id is None:
        raise KeyRefused("This store has no audit identity yet (no audited write has happened), so it has no "
                         "audit key to export or import.")
    return store_id


def export_text(session: Session) -> tuple[str, keys.AuditKey]:
    """The export file's content for the store of `session`, and the key it carries."""
    store_id = _store(session)
    try:
        key = keys.load_key(store_id)
    except keys.KeyUnavailable as exc:
        raise KeyRefused(str(exc)) from exc
    if key is None:
        raise KeyRefused(f"This machine holds no audit key for store {store_id} (looked in "
                         f"{keys.key_path(store_id)}); export it on the machine that wrote the store.")
    body = {"type": KEY_FORMAT, "format": 1, "store_id": store_id, "exported_at": time.time(),
            "keys": [{"secret": k.secret.hex(), "keyed_from": k.keyed_from, "created_at": k.created_at,
                      "fingerprint": k.fingerprint} for k in key.known]}
    return json.dumps(body, indent=1) + "\n", key


def read_key_file(path: Path) -> tuple[str | None, list[keys.KnownKey]]:
    """The store id a key file names and the keys it holds; KeyRefused (one sentence) when it holds none."""
    require_regular_file(path, "The key file", KeyRefused)  # a FIFO would block, /dev/zero never end
    try:
        with open(path, "rb") as handle:
            raw = handle.read(KEY_FILE_LIMIT + 1)
    except FileNotFoundError:
        raise KeyRefused(f"There is no key file at {path}.") from None
    except OSError as exc:
        raise KeyRefused(f"The key file {path} cannot be read: {exc.strerror or exc}.") from None
    try:
        if len(raw) > KEY_FILE_LIMIT:
            raise ValueError("too large")
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        store_id = data.get("store_id")
        if data.get("type") == KEY_FORMAT:
            found = [keys._known(item) for item in data["keys"]]
        else:  # a key file itself (a backup of <config>/audit/<store_id>.key)
            found = [keys._known(data), *(keys._known(item) for item in data.get("also") or ())]
        if not found:
            raise ValueError("no key")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise KeyRefused(f"{path} holds no audit key (a file `agentdesk audit key export` wrote, or an audit "
                         "key file, is expected).") from None
    return (store_id if isinstance(store_id, str) else None), found


@dataclass(frozen=True, slots=True)
class Imported:
    key: keys.AuditKey
    """What this machine now holds for the store."""
    added: tuple[str, ...]
    """Fingerprints of the keys this import added."""
    signing_changed: bool


def _verified(session: Session, found: list[keys.KnownKey]) -> tuple[int, set[str]]:
    """How many records are signed, and the fingerprints of the keys in `found` that verify at least one."""
    wanted = {k.fingerprint: k for k in found}
    hit: set[str] = set()
    signed, last = 0, 0
    while True:
        rows = session.execute(select(AuditRow.seq, AuditRow.hash, AuditRow.mac).where(
            AuditRow.seq > last, AuditRow.mac.is_not(None)).order_by(AuditRow.seq).limit(BATCH)).all()
        if not rows:
            return signed, hit
        for row in rows:
            signed += 1
            if isinstance(row.hash, str) and isinstance(row.mac, str):
                for fp, key in wanted.items():
                    if fp not in hit and keys.same(row.mac, key.mac(row.hash)):
                        hit.add(fp)
        last = int(rows[-1].seq)


def import_keys(session: Session, path: Path, *, sign: bool = False) -> Imported:
    """Add the keys of `path` to what this machine holds for the store of `session` (see the module)."""
    store_id = _store(session)
    named, found = read_key_file(path)
    if named is not None and named != store_id:
        raise KeyRefused(f"{path} holds the audit key of store {named}, not of this store ({store_id}); nothing "
                         "was imported.")
    signed, verifying = _verified(session, found)
    if signed:
        for known in found:
            if known.fingerprint not in verifying:
                raise KeyRefused(f"The key {known.fingerprint} in {path} verifies none of the store's {signed:,} "
                                 "signed records, so it is not a key this store was signed with; nothing was "
                                 "imported.")
    try:
        held = keys.load_key(store_id)
    except keys.KeyUnavailable as exc:
        raise KeyRefused(f"{exc} Nothing was imported.") from exc
    first = found[0]
    if held is None:
        new = keys.AuditKey(store_id, first.secret, first.keyed_from, "", tuple(found[1:]), first.created_at)
        added = tuple(k.fingerprint for k in found)
        changed = True
    else:
        have = {k.fingerprint for k in held.known}
        fresh = tuple(k for k in found if k.fingerprint not in have)
        added = tuple(k.fingerprint for k in fresh)
        new = replace(held, also=held.also + fresh)
        changed = sign and first.fingerprint != held.fingerprint
        if changed:  # the imported key signs from now on; the old signing key stays, to verify its records
            rest = tuple(k for k in new.known if k.fingerprint != first.fingerprint)
            new = replace(new, secret=first.secret, keyed_from=first.keyed_from, created_at=first.created_at,
                          also=rest)
    if added or changed:
        try:
            new = keys.save_key(new)
        except keys.KeyUnavailable as exc:
            raise KeyRefused(f"{exc} Nothing was imported.") from exc
        chain._KEYS.pop((str(keys.config_dir()), store_id), None)  # this process signs with what is saved now
    else:
        new = held if held is not None else new
    return Imported(new, added, changed)
