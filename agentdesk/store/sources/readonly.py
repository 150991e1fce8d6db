"""Opening another runtime's SQLite file for reading without leaving anything beside it.

A WAL-mode database read with `mode=ro` needs its `-shm` index: when the runtime is
running it has one and we share it; when the runtime is stopped there is none, and a
`mode=ro` reader would create `-wal`/`-shm` (or fail, in a read-only folder, with
"unable to open database file"). Then the file is opened `immutable=1` instead: SQLite
reads it as a plain file and creates nothing, at the price of not seeing later commits,
which `LIVE_NOTE` says in `info` and the window's status bar. The source switches to `mode=ro`
on its next read once a `-shm` appears (the runtime started), so live updates resume.
"""

from __future__ import annotations

from pathlib import Path

from agentdesk.store.persistence import sqlite

LIVE_NOTE = ("opened immutable (a WAL database with no -shm beside it: its runtime is not running or the folder "
             "is read-only), so agentdesk leaves no files next to it; live updates start once the runtime runs "
             "again (its -shm appears).")


def needs_immutable(path: Path) -> bool:
    """Read-only access must use `immutable=1`: a WAL file without its shared-memory index beside it."""
    return sqlite.wal_without_index(path)
