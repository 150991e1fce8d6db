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

WAL_VERSION_OFFSET = 18
"""Bytes 18 and 19 of a SQLite header: file format write/read version, 2 for WAL (1 for a rollback journal)."""
LIVE_NOTE = ("opened immutable (a WAL database with no -shm beside it: its runtime is not running or the folder "
             "is read-only), so agentdesk leaves no files next to it; live updates start once the runtime runs "
             "again (its -shm appears).")


def is_wal(path: Path) -> bool:
    """Whether the file's header says WAL mode (read from the header: opening it would change the folder)."""
    try:
        with path.open("rb") as handle:
            header = handle.read(WAL_VERSION_OFFSET + 2)
    except OSError:
        return False
    return len(header) == WAL_VERSION_OFFSET + 2 and header[WAL_VERSION_OFFSET] == 2


def needs_immutable(path: Path) -> bool:
    """Read-only access must use `immutable=1`: a WAL file without its shared-memory index beside it."""
    return is_wal(path) and not path.with_name(path.name + "-shm").exists()
