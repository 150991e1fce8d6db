"""PostgreSQL: pg_dump and pg_restore, with the audit key in a file of its own.

The dump (custom format) holds every table but the audit key's row: `FILE` can go wherever backups
go. The key (one row of `agentdesk_audit_key`, the HMAC's padded keys) goes into `FILE.key`, a
data-only dump of that table, 0600: whoever reads it can sign records as the server does, so it is
kept as the owner's password is (docs/postgres.md, "Backups"). A restore needs both.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from agentdesk.store.backup.tools import find_tool
from agentdesk.store.errors import InvalidInput, StoreUnavailable
from agentdesk.store.persistence.postgres import engine as pg

Progress = Callable[[int, int], None]
KEY_TABLE = "public.agentdesk_audit_key"
KEY_SUFFIX = ".key"
DUMPING = re.compile(r"(dumping contents of table|processing data for table) ")
"""The --verbose line pg_dump / pg_restore prints as each table's rows start: one step of the progress."""


def key_file(dump: Path) -> Path:
    return dump.with_name(dump.name + KEY_SUFFIX)


def conninfo(url: str) -> tuple[str, dict[str, str]]:
    """A libpq URI without the password (argv is public), and the environment that carries it."""
    parsed = make_url(pg.normalise(url))
    env = dict(os.environ)
    if parsed.password:
        env["PGPASSWORD"] = str(parsed.password)
    # URL.set() leaves a None unchanged: _replace really drops the password from what goes on the command line.
    shown = parsed.set(drivername="postgresql")._replace(password=None).render_as_string(hide_password=False)
    return shown, env


def _tables(url: str) -> int:
    engine = create_engine(pg.normalise(url))
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")).scalar()
                       or 0)
    finally:
        engine.dispose()


def has_store(url: str) -> bool:
    """Whether the database already holds an agentdesk store (its audit log)."""
    engine = create_engine(pg.normalise(url))
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT to_regclass('public.audit_log') IS NOT NULL")).scalar() is True
    except Exception as exc:
        raise StoreUnavailable(f"Cannot reach {pg.display(url)}: {str(exc).strip().splitlines()[0]}") from exc
    finally:
        engine.dispose()


def _run(tool: str, args: list[str], url: str, total: int, progress: Progress | None, doing: str) -> None:
    """Run pg_dump/pg_restore --verbose, counting tables for `progress`; its error as one sentence."""
    info, env = conninfo(url)
    command = [str(find_tool(tool)), "--verbose", *args, "--dbname", info]
    done, errors = 0, []
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True,
                          errors="replace") as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            if DUMPING.search(line):
                done += 1
                if progress is not None:
                    progress(min(done, total), total)
            elif "error" in line.lower() or "fatal" in line.lower():
                errors.append(line.strip())
    if proc.returncode != 0:
        said = errors[0] if errors else f"{tool} exited with {proc.returncode}"
        raise StoreUnavailable(f"{doing} failed: {said.removeprefix(tool + ': ').removeprefix('error: ')}")


def backup(url: str, dest: Path, progress: Progress | None = None) -> Path:
    """Dump the store at `url` into `dest` (without the key) and its key into `dest.key`; both 0600."""
    key = key_file(dest)
    temp, key_temp = (p.with_name(f".{p.name}.partial-{os.getpid()}") for p in (dest, key))
    for path in (temp, key_temp):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))  # pg_dump keeps an existing mode
    try:
        _run("pg_dump", ["--format=custom", f"--exclude-table-data={KEY_TABLE}", "--file", str(temp)], url,
             _tables(url), progress, "The backup")
        _run("pg_dump", ["--format=custom", "--data-only", f"--table={KEY_TABLE}", "--file", str(key_temp)], url,
             1, None, "Saving the audit key")
        os.replace(key_temp, key)
        os.replace(temp, dest)
    finally:
        for path in (temp, key_temp):
            path.unlink(missing_ok=True)
    return key


def restore(dump: Path, url: str, *, key: Path | None = None, replace: bool = False,
            progress: Progress | None = None) -> None:
    """Restore `dump` into the database at `url` (dropping what is there when `replace`), then its key.

    Each file is restored in one transaction (`--single-transaction`): a failed restore leaves the
    database as it was.
    """
    key = key or key_file(dump)
    for path, what in ((dump, "backup"), (key, "audit key")):
        if not path.is_file():
            raise InvalidInput(f"The {what} file {path} is missing"
                               + (" (the backup writes it beside the dump as FILE.key; give it with --key)."
                                  if what == "audit key" else "."))
    clean = ["--clean", "--if-exists"] if replace else []
    _run("pg_restore", ["--single-transaction", "--exit-on-error", *clean, str(dump)], url, _tables_in(dump),
         progress, "The restore")
    _run("pg_restore", ["--single-transaction", "--exit-on-error", "--data-only", str(key)], url, 1, None,
         "Restoring the audit key")


def _tables_in(dump: Path) -> int:
    listing = subprocess.run([str(find_tool("pg_restore")), "--list", str(dump)], capture_output=True, text=True,
                             errors="replace", check=False)
    if listing.returncode != 0:
        raise InvalidInput(f"{dump} is not a pg_dump archive agentdesk can restore "
                           f"({(listing.stderr.strip().splitlines() or ['unreadable'])[0]}).")
    return sum(" TABLE DATA " in line for line in listing.stdout.splitlines()) or 1
