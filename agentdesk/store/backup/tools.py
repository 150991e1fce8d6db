"""Finding pg_dump and pg_restore: $PG_BIN when set (only there), else the Debian layout (newest major first),
then PATH, as tests/postgres/server.py finds pg_ctl."""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

from agentdesk.store.errors import StoreUnavailable


def find_tool(name: str) -> Path:
    """The newest `name` (pg_dump, pg_restore) found; refused in one sentence when there is none.

    The Debian folders come before PATH because /usr/bin's wrapper picks a version by the cluster it
    guesses, and a pg_dump older than the server refuses to dump it.
    """
    chosen = os.environ.get("PG_BIN")
    folders = [chosen] if chosen else sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_major, reverse=True)
    for folder in folders:
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = None if chosen else shutil.which(name)
    if found:
        return Path(found)
    where = f"$PG_BIN ({chosen})" if chosen else "/usr/lib/postgresql/*/bin and PATH"
    raise StoreUnavailable(f"{name} was not found (looked in {where}); "
                           f"install PostgreSQL's client programs (Debian: postgresql-client) or set $PG_BIN "
                           f"to the folder that holds {name}.")


def _major(folder: str) -> int:
    try:
        return int(Path(folder).parent.name.split(".")[0])
    except ValueError:
        return 0
