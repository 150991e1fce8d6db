"""The audit key and the anchor file of each store, kept outside the database.

Why outside: anyone who can write the store file can rewrite its audit table and
recompute every hash. The key (which signs each record) and the anchor (the chain
head after every audited commit) live in the user's config directory, owner-only
(0700 folder, 0600 files), so an edit of the database alone is detected. Where a
keyring library is importable and no `$AGENTDESK_CONFIG_DIR` is set (tests and CI
set it), the key goes into the OS keyring instead; the anchor is always a file.

Files, per store (named by the store's id in `agentdesk_meta.store_id`):
  <config>/audit/<store_id>.key            {"store_id", "secret", "keyed_from", "created_at", "also"}
                                           (`also`: keys imported beside the signing one, each
                                           {"secret", "keyed_from", "created_at"}, issue 26)
  <config>/audit/<store_id>.anchor.jsonl   one line per audited commit: {"type": "anchor", "v": 2, "seq",
                                           "hash", "at", "location", "mac"} (the MAC covers the location
                                           from "v": 2 on; older lines, without "v", cover seq and hash;
                                           on PostgreSQL the server signs format 2 from migration 0014 on)
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import hmac
import importlib
import json
import logging
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
from sqlalchemy.engine import make_url

from agentdesk.store.persistence.sqlite import make_private_dirs

log = logging.getLogger("agentdesk.audit")

KEYRING_SERVICE = "agentdesk-audit"
ANCHOR_LINE_LIMIT = 4096
"""An anchor line is ~250 bytes; a longer one is not ours (and is not read whole)."""


def config_dir() -> Path:
    """$AGENTDESK_CONFIG_DIR (CI and tests set it), else the user's config directory."""
    base = os.environ.get("AGENTDESK_CONFIG_DIR") or platformdirs.user_config_dir("agentdesk", appauthor=False)
    return Path(base)


def audit_dir(create: bool = False) -> Path:
    folder = config_dir() / "audit"
    if create:
        make_private_dirs(folder)  # the config folder too, where agentdesk makes it: 0700 each
        with contextlib.suppress(OSError):
            os.chmod(folder, 0o700)
    return folder


def key_path(store_id: str) -> Path:
    return audit_dir() / f"{_safe(store_id)}.key"


def anchor_path(store_id: str) -> Path:
    return audit_dir() / f"{_safe(store_id)}.anchor.jsonl"


def _safe(store_id: str) -> str:
    """A store id is our own hex uuid; anything else (a tampered meta row) still makes one file name."""
    if store_id.isalnum() and len(store_id) <= 64:
        return store_id
    return "h" + hashlib.sha256(store_id.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def record_mac(secret: bytes, record_hash: str) -> str:
    return hmac.new(secret, b"agentdesk-audit-record:" + record_hash.encode(), hashlib.sha256).hexdigest()


def fingerprint(secret: bytes) -> str:
    """A key's short public name (8 hex digits), shown by `verify` and `audit key`; it reveals nothing of it."""
    return hashlib.sha256(b"agentdesk-audit-key-id:" + secret).hexdigest()[:8]


@dataclass(frozen=True, slots=True)
class KnownKey:
    """One key a store's records may be signed with: the signing key, or one imported beside it."""

    secret: bytes
    keyed_from: int
    created_at: float | None = None

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.secret)

    def mac(self, record_hash: str) -> str:
        return record_mac(self.secret, record_hash)


@dataclass(frozen=True, slots=True)
class AuditKey:
    store_id: str
    secret: bytes
    keyed_from: int
    """The first record seq signed with this key: records before it predate keying."""
    where: str
    """Where it is kept: a file path, or "the OS keyring"."""
    also: tuple[KnownKey, ...] = ()
    """Other keys of this store this machine holds (imported beside the signing key: a store written
    from two config folders that each made a key, issue 26). They verify records; they never sign."""
    created_at: float | None = None

    def mac(self, record_hash: str) -> str:
        return record_mac(self.secret, record_hash)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.secret)

    @property
    def known(self) -> tuple[KnownKey, ...]:
        """Every key held for the store, the signing key first."""
        return (KnownKey(self.secret, self.keyed_from, self.created_at), *self.also)

    @property
    def first_keyed(self) -> int:
        """The first record any held key signs: records before it predate keying."""
        return min(k.keyed_from for k in self.known)

    def signer(self, record_hash: str, mac: str) -> KnownKey | None:
        """The held key whose HMAC of `record_hash` is `mac`, None when none is."""
        for known in self.known:
            if same(mac, known.mac(record_hash)):
                return known
        return None

    def anchor_mac(self, seq: int, record_hash: str) -> str:
        """The older anchor line MAC (no "v"): seq and hash only. Kept for export heads and reading old lines."""
        return _anchor_mac_v1(self.secret, self.store_id, seq, record_hash)

    def anchor_mac_v2(self, seq: int, record_hash: str, location: str) -> str:
        return _anchor_mac_v2(self.secret, self.store_id, seq, record_hash, location)

    def line_ok(self, entry: AnchorEntry) -> bool:
        """Whether an anchor line's MAC verifies under one of the held keys, in the line's own format."""
        if entry.mac is None:
            return True
        for known in self.known:
            if entry.version >= 2:
                if entry.location is not None and same(entry.mac, _anchor_mac_v2(
                        known.secret, self.store_id, entry.seq, entry.hash, entry.location)):
                    return True
            elif same(entry.mac, _anchor_mac_v1(known.secret, self.store_id, entry.seq, entry.hash)):
                return True
        return False


def _anchor_mac_v1(secret: bytes, store_id: str, seq: int, record_hash: str) -> str:
    body = f"agentdesk-audit-anchor:{store_id}:{seq}:{record_hash}".encode("utf-8", "surrogatepass")
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def _anchor_mac_v2(secret: bytes, store_id: str, seq: int, record_hash: str, location: str) -> str:
    """From anchor format 2 on the line's location is covered too: moving a line to another location (so
    `verify` of this store skips it) breaks its MAC (issue 26, item 10)."""
    body = json.dumps(["agentdesk-audit-anchor", 2, store_id, seq, record_hash, location], ensure_ascii=True)
    return hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()


def same(a: str, b: str) -> bool:
    """Constant-time equality of two texts; any characters (`hmac.compare_digest` refuses non-ASCII str)."""
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


class KeyUnavailable(Exception):
    """The key could not be read or created (folder not writable, keyring refused)."""


# -- key -------------------------------------------------------------------------------------
def _keyring() -> Any | None:
    """The `keyring` module when it is installed and tests/CI do not pin the config folder."""
    if os.environ.get("AGENTDESK_CONFIG_DIR"):
        return None
    try:
        return importlib.import_module("keyring")
    except ImportError:
        return None


def _parse_key(text: str, store_id: str, where: str) -> AuditKey:
    try:
        data = json.loads(text)
        also = tuple(_known(item) for item in data.get("also") or ())
        main = _known(data)
        return AuditKey(store_id, main.secret, main.keyed_from, where, also, main.created_at)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise KeyUnavailable(f"The audit key {where} is unreadable ({exc}).") from exc


def _known(data: Any) -> KnownKey:
    """One key from its JSON form; raises ValueError/KeyError/TypeError when it is not one."""
    secret = bytes.fromhex(data["secret"])
    if len(secret) < 16:
        raise ValueError("a key of fewer than 16 bytes")
    keyed_from = data["keyed_from"]
    if type(keyed_from) is not int or keyed_from < 1:
        raise ValueError(f"keyed_from {keyed_from!r} is not a record number")
    created = data.get("created_at")
    return KnownKey(secret, keyed_from, float(created) if isinstance(created, int | float) else None)


def _key_json(known: KnownKey) -> dict[str, Any]:
    return {"secret": known.secret.hex(), "keyed_from": known.keyed_from, "created_at": known.created_at}


def key_text(key: AuditKey) -> str:
    """The key file's content: the signing key, and the keys held beside it."""
    main = {"store_id": key.store_id, **_key_json(key.known[0])}
    if key.also:
        main["also"] = [_key_json(k) for k in key.also]
    return json.dumps(main)


def save_key(key: AuditKey) -> AuditKey:
    """Write `key` (and the keys beside it) where the store's key is kept, replacing it whole.

    The OS keyring when `key.where` says so (or no key is held yet and a keyring is usable), else the
    key file, written beside and renamed into place `0600` in the `0700` audit folder, so a failed write
    leaves the old key file as it was. Raises KeyUnavailable.
    """
    text = key_text(key)
    ring = _keyring()
    if ring is not None and key.where in ("", "the OS keyring"):
        try:
            ring.set_password(KEYRING_SERVICE, key.store_id, text)
            return _parse_key(text, key.store_id, "the OS keyring")
        except Exception:  # no usable keyring backend: use the file
            log.info("No usable OS keyring; the audit key goes into %s.", key_path(key.store_id))
    path = key_path(key.store_id)
    temp = None
    try:
        audit_dir(create=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
        temp = Path(name)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
        temp = None
    except OSError as exc:
        raise KeyUnavailable(f"The audit key {path} cannot be written: {exc.strerror or exc}.") from exc
    finally:
        if temp is not None:
            with contextlib.suppress(OSError):
                temp.unlink()
    return _parse_key(text, key.store_id, str(path))


def load_key(store_id: str) -> AuditKey | None:
    """The store's key, or None when this machine has none."""
    ring = _keyring()
    if ring is not None:
        try:
            text = ring.get_password(KEYRING_SERVICE, store_id)
        except Exception:  # any keyring backend failure falls back to the file
            text = None
        if text:
            return _parse_key(text, store_id, "the OS keyring")
    path = key_path(store_id)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(ANCHOR_LINE_LIMIT)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise KeyUnavailable(f"The audit key {path} cannot be read: {exc.strerror or exc}.") from exc
    return _parse_key(text, store_id, str(path))


def create_key(store_id: str, keyed_from: int) -> AuditKey:
    """Make the store's key (once: a concurrent creator's key wins and is returned)."""
    existing = load_key(store_id)
    if existing is not None:
        return existing
    text = json.dumps({"store_id": store_id, "secret": secrets.token_hex(32), "keyed_from": keyed_from,
                       "created_at": time.time()})
    ring = _keyring()
    if ring is not None:
        try:
            ring.set_password(KEYRING_SERVICE, store_id, text)
            return _parse_key(text, store_id, "the OS keyring")
        except Exception:  # no usable keyring backend: use the file
            log.info("No usable OS keyring; the audit key goes into %s.", key_path(store_id))
    path = key_path(store_id)
    try:
        audit_dir(create=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        found = load_key(store_id)
        if found is None:
            raise KeyUnavailable(f"The audit key {path} vanished while it was created.") from None
        return found
    except OSError as exc:
        raise KeyUnavailable(f"The audit key {path} cannot be created: {exc.strerror or exc}.") from exc
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return _parse_key(text, store_id, str(path))


# -- anchor ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AnchorEntry:
    seq: int
    hash: str
    at: float | None
    mac: str | None
    location: str | None = None
    version: int = 1
    """2: the MAC covers the location too; 1: an older line, whose MAC covers seq and hash only."""


def anchor_line(key: AuditKey, seq: int, record_hash: str, location: str, mac: str | None = None,
                version: int = 2) -> str:
    """`mac`: the line's MAC when the server signed it (PostgreSQL: format 2 from migration 0014 on, over
    seq, hash and location; `version=1` for the older format of 0008), else the key's (format 2)."""
    line: dict[str, Any] = {"type": "anchor", "seq": seq, "hash": record_hash, "at": time.time(),
                            "location": location}
    if mac:
        line["mac"] = mac
        if version >= 2:
            line["v"] = 2
    else:
        line["v"], line["mac"] = 2, key.anchor_mac_v2(seq, record_hash, location)
    return json.dumps(line, ensure_ascii=True, sort_keys=True) + "\n"


def append_anchor(key: AuditKey, seq: int, record_hash: str, location: str, mac: str | None = None, *,
                  version: int = 2, durable: bool = False) -> Path:
    """Append the chain head to the anchor file; raises OSError on failure.

    One `write` of one short line on an O_APPEND descriptor: concurrent writers'
    lines never interleave within a line (they may land out of seq order, which
    the reader allows). When this returns the line is in the file (the kernel's page
    cache: a `kill -9` of this process or any other cannot lose it); it reaches the
    disk by a background `fdatasync` within `ANCHOR_SYNC_DELAY_S`, off the writer's
    path, and every process flushes its pending syncs at exit (docs/audit.md,
    "Anchor durability"). `durable=True` syncs before returning.
    """
    path = anchor_path(key.store_id)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except FileNotFoundError:  # the folder is made once, on the first anchor (or key) of this user
        audit_dir(create=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, anchor_line(key, seq, record_hash, location, mac, version).encode())
        if durable:
            _sync(fd)
    finally:
        os.close(fd)
    if not durable:
        _syncer.schedule(path)
    return path


def _sync(fd: int) -> None:
    """The data reaches the disk before the call returns (fdatasync: the line, not the mtime)."""
    sync = getattr(os, "fdatasync", os.fsync)
    sync(fd)


ANCHOR_SYNC_DELAY_S = 0.05
"""How long the background syncer gathers anchor lines before one `fdatasync` takes them all."""


class AnchorSyncer:
    """Group commit of anchor lines: one background `fdatasync` per file for everything appended meanwhile.

    Why: an audited commit used to fsync its anchor line before returning (8 ms p50, 74 ms p99 under
    load, on the operator's path). The line itself is written before the writer returns, so a crash of
    the process loses nothing; only the flush to the disk waits here, which matters for a power loss or
    an OS crash alone (docs/audit.md). A sync that fails is logged; the next append retries it.
    """

    def __init__(self, delay_s: float = ANCHOR_SYNC_DELAY_S) -> None:
        self.delay_s = delay_s
        self._pending: set[Path] = set()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._syncing = 0

    def schedule(self, path: Path) -> None:
        with self._cond:
            self._pending.add(path)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="agentdesk-anchor-sync", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending:
                    self._cond.wait()
                began = time.monotonic()
                # gather: every line appended meanwhile shares the next fdatasync (delay_s is read each turn)
                while self._pending and time.monotonic() < began + self.delay_s:
                    self._cond.wait(max(0.0, began + self.delay_s - time.monotonic()))
            self._sync_pending()

    def _sync_pending(self) -> None:
        with self._cond:
            paths, self._pending = self._pending, set()
            self._syncing += 1
        try:
            for path in paths:
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
                    try:
                        _sync(fd)
                    finally:
                        os.close(fd)
                except OSError as exc:
                    log.warning("agentdesk: the audit anchor %s could not be flushed to disk (%s).", path, exc)
        finally:
            with self._cond:
                self._syncing -= 1
                self._cond.notify_all()

    def flush(self) -> None:
        """Sync every pending anchor now and wait for a background sync in progress (at exit, in tests)."""
        self._sync_pending()
        with self._cond:
            while self._syncing:
                self._cond.wait(1.0)

    def pending(self) -> set[Path]:
        with self._cond:
            return set(self._pending)

    def _after_fork(self) -> None:
        """A forked child has no syncer thread (only the forking thread survives) and inherits no duty."""
        self._cond = threading.Condition()
        self._pending, self._thread, self._syncing = set(), None, 0


_syncer = AnchorSyncer()
atexit.register(_syncer.flush)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_syncer._after_fork)


def flush_anchors() -> None:
    """Every anchor line this process appended is on the disk when this returns."""
    _syncer.flush()


@dataclass(frozen=True, slots=True)
class Anchor:
    """Every chain head an anchor file holds, by seq.

    The first line for a seq wins: a seq has one hash in an untouched history, so a
    later line with another hash for it means the log was replaced and restarted.
    """

    heads: dict[int, str]
    where: str
    unreadable_lines: int
    forged_lines: int
    """Lines whose MAC does not verify under the key (0 when the key is not at hand)."""
    older_lines: int = 0
    """Lines used for this location in the older format, whose MAC does not cover their location."""
    lines: tuple[tuple[int, str], ...] = ()
    """Every accepted (seq, hash) in file order: after a restore, the lines before the restored history's
    first line are the history the restore ended (audit/restore.py)."""

    @property
    def max_seq(self) -> int:
        return max(self.heads, default=0)


def read_anchor(path: Path, key: AuditKey | None = None, location: str | None = None, *,
                check_lines: Callable[[list[AnchorEntry]], list[bool]] | None = None) -> Anchor | None:
    """The anchor at `path` (a local anchor file or an `audit export`), None if it does not exist.

    Lines without `"type": "anchor"` (an export's header and records) are skipped; a line
    that is not JSON or lacks seq/hash is counted, never raised. With `location`, lines
    written from another location are skipped: a copied store file shares its id (and key)
    with the original, but each copy's history goes on separately.
    """
    heads: dict[int, str] = {}
    accepted: list[tuple[int, str]] = []
    pending: list[AnchorEntry] = []  # with check_lines (PostgreSQL: the server checks MACs), checked at once
    bad = forged = older = 0
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below; bounded lines, read as a stream
    except FileNotFoundError:
        return None
    with handle:
        for raw in _bounded_lines(handle):
            if not raw.strip():
                continue
            entry = _entry(raw)
            if entry is None:
                bad += 1
                continue
            if entry is SKIP:
                continue
            # The MAC before the location: a format-2 line whose location was edited (so that this store's
            # check would skip it) is forged, not another location's line.
            if key is not None and not key.line_ok(entry):
                forged += 1
                continue
            elsewhere = location is not None and entry.location is not None and not same_database(entry.location,
                                                                                                   location)
            if check_lines is not None and (not elsewhere or entry.version >= 2):
                pending.append(entry)  # a format-2 line of another location too: its MAC covers the location
                continue
            if elsewhere:
                continue
            older += location is not None and entry.version < 2 and entry.mac is not None
            heads.setdefault(entry.seq, entry.hash)  # the first head seen for a seq is the one history had
            accepted.append((entry.seq, entry.hash))
    if pending and check_lines is not None:
        for entry, ok in zip(pending, check_lines(pending), strict=True):
            if not ok:
                forged += 1
                continue
            if location is not None and entry.location is not None and not same_database(entry.location, location):
                continue
            older += location is not None and entry.version < 2 and entry.mac is not None
            heads.setdefault(entry.seq, entry.hash)
            accepted.append((entry.seq, entry.hash))
    return Anchor(heads, str(path), bad, forged, older, tuple(accepted))


@functools.lru_cache(maxsize=256)
def database_of(location: str | None) -> str:
    """A location without its login. On PostgreSQL each login's lines name its own URL (`alice@host/db`), and
    all of them anchor the one database: `verify` as a viewer checks the lines an agent's or an operator's
    login wrote on this machine too, and `admin rebase-anchors` moves them all."""
    if not location or "://" not in location:
        return location or ""
    try:
        return make_url(location)._replace(username=None, password=None).render_as_string(hide_password=True)
    except Exception:  # a location is a hint; an unparseable one is only equal to itself
        return location


def same_database(a: str, b: str) -> bool:
    return a == b or database_of(a) == database_of(b)


def _bounded_lines(handle: Any) -> Iterator[bytes]:
    """Lines of at most ANCHOR_LINE_LIMIT bytes; longer lines are skipped without being held whole."""
    while True:
        line = handle.readline(ANCHOR_LINE_LIMIT + 1)
        if not line:
            return
        if len(line) > ANCHOR_LINE_LIMIT and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):  # an export's long record line: never an anchor line
                line = handle.readline(ANCHOR_LINE_LIMIT + 1)
            continue
        yield line


SKIP = AnchorEntry(-1, "", None, None)
"""A well-formed line of another type (an export's header or records)."""


def _entry(raw: bytes) -> AnchorEntry | None:
    """The anchor entry on one line, SKIP for another kind of line, None for an unreadable one."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if data.get("type") != "anchor":
        return SKIP
    seq, digest, at, mac = data.get("seq"), data.get("hash"), data.get("at"), data.get("mac")
    where, version = data.get("location"), data.get("v", 1)
    if type(seq) is not int or not isinstance(digest, str) or version not in (1, 2) or type(version) is not int:
        return None
    return AnchorEntry(seq, digest, at if isinstance(at, int | float) else None,
                       mac if isinstance(mac, str) else None, where if isinstance(where, str) else None, version)


def stores_anchored_at(location: str) -> list[str]:
    """Ids of the stores whose anchor's last line was written from `location` (one short read each)."""
    if not location:
        return []
    found = []
    try:
        paths = sorted(audit_dir().glob("*.anchor.jsonl"))
    except OSError:
        return []
    for path in paths:
        try:
            with open(path, "rb") as handle:
                handle.seek(max(0, path.stat().st_size - ANCHOR_LINE_LIMIT))
                tail = handle.read(ANCHOR_LINE_LIMIT).splitlines()
        except OSError:
            continue
        try:
            data = json.loads(tail[-1]) if tail else None
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("location") == location:
            found.append(path.name.removesuffix(".anchor.jsonl"))
    return found
