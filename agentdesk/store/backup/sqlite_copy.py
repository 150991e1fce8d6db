"""SQLite: the online backup API, both ways (a live store is copied page by page under SQLite's own locks)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from agentdesk.store.errors import InvalidInput, StoreUnavailable
from agentdesk.store.persistence import sqlite

Progress = Callable[[int, int], None]
"""progress(done, total): pages for SQLite, tables for PostgreSQL."""
PAGES_PER_STEP = 1024


def _copy(source: sqlite3.Connection, target: sqlite3.Connection, progress: Progress | None) -> None:
    def step(_status: int, remaining: int, total: int) -> None:
        if progress is not None:
            progress(total - remaining, total)

    source.backup(target, pages=PAGES_PER_STEP, progress=step)


def backup(store_path: Path, dest: Path, busy_timeout_s: float, progress: Progress | None = None) -> None:
    """Copy the store at `store_path` into the new file `dest` (0600), while agents and windows keep writing.

    Written to a temp file beside `dest` and renamed, so a half-made backup never carries its name.
    """
    temp = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    sqlite.create_private_file(temp)
    try:
        source = sqlite.open_probe(store_path, busy_timeout_s)
        try:
            target = sqlite3.connect(temp)
            try:
                _copy(source, target, progress)
            finally:
                target.close()
        finally:
            source.close()
        os.replace(temp, dest)
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"The backup of {store_path} failed: {exc}.") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


def check_backup(path: Path) -> None:
    """Refuse in one sentence a file that is not an agentdesk SQLite store."""
    if not path.is_file() or not sqlite.looks_like_sqlite(path):
        raise InvalidInput(f"{path} is not a SQLite backup of an agentdesk store.")
    probe = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = sqlite.table_names(probe)
    finally:
        probe.close()
    if "audit_log" not in tables:
        raise InvalidInput(f"{path} is a SQLite database but not an agentdesk store (it has no audit log).")


def restore(backup_file: Path, store_path: Path, busy_timeout_s: float, progress: Progress | None = None) -> None:
    """Copy `backup_file` over the store at `store_path` (made 0600 if new), under SQLite's locks.

    Open windows see the new content as a change of the file (their watcher re-reads); the caller
    decides whether overwriting a store that exists is wanted (`--force`).
    """
    check_backup(backup_file)
    sqlite.make_private_dirs(store_path.parent)
    sqlite.create_private_file(store_path)
    try:
        source = sqlite3.connect(f"file:{backup_file}?mode=ro", uri=True)
        try:
            target = sqlite3.connect(store_path, timeout=busy_timeout_s)
            try:
                _copy(source, target, progress)
            finally:
                target.close()
        finally:
            source.close()
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"The restore of {store_path} from {backup_file} failed: {exc}.") from exc
