"""A landed revision never changes: its file (and the SQL files it reads) hash to what the manifest says.

A database keeps the revision it ran: editing a revision after it landed changes nothing in the databases
that already ran it (0008_pg_functions was edited three times; 0021_pg_functions_refresh repairs what that
left). agentdesk/store/migrations/landed.sha256 holds the SHA-256 of every revision file and every
versioned SQL file (line endings as LF, so a Windows checkout hashes the same); a new revision adds its
lines, and an edit fails here with the sentence that says what to do instead.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from agentdesk.store.persistence.database import MIGRATIONS

MANIFEST = MIGRATIONS / "landed.sha256"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes().replace(b"\r\n", b"\n")).hexdigest()


def manifest() -> dict[str, str]:
    lines = [line.split("  ", 1) for line in MANIFEST.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {name: digest_ for digest_, name in lines}


def landed_files() -> list[str]:
    return sorted(str(p.relative_to(MIGRATIONS)) for pattern in ("versions/[0-9]*.py", "sql/*/*.sql")
                  for p in MIGRATIONS.glob(pattern))


def test_no_landed_revision_or_sql_file_was_edited() -> None:
    changed = [name for name, expected in manifest().items()
               if (MIGRATIONS / name).exists() and digest(MIGRATIONS / name) != expected]
    lines = "\n".join(f"{digest(MIGRATIONS / name)}  {name}" for name in changed)
    assert not changed, (
        f"{', '.join(changed)} changed after it landed: a database that already ran it keeps what it ran, so "
        "put the old text back and add a new revision (with its own sql/NNNN/ folder) that makes the change. "
        f"(Only for a revision not yet on main, re-chained at a merge, replace its line with:\n{lines})")


def test_no_landed_file_was_removed() -> None:
    gone = [name for name in manifest() if not (MIGRATIONS / name).exists()]
    assert not gone, f"{', '.join(gone)} was removed after it landed: databases that ran it need it in the chain."


def test_every_revision_and_sql_file_has_its_line() -> None:
    missing = [name for name in landed_files() if name not in manifest()]
    lines = "\n".join(f"{digest(MIGRATIONS / name)}  {name}" for name in missing)
    assert not missing, (
        f"add these lines to {MANIFEST.relative_to(MIGRATIONS.parents[2])} (a new revision is landed with its "
        f"hash; from then on it never changes):\n{lines}")


def test_every_sql_file_a_revision_reads_ships_in_the_wheel() -> None:
    """Revisions read sql/NNNN/ beside them at run time: a wheel without those files cannot upgrade a database."""
    import tomllib

    project = tomllib.loads((MIGRATIONS.parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = project["tool"]["setuptools"]["package-data"]["agentdesk.store.migrations"]
    shipped = {p for pattern in patterns for p in MIGRATIONS.glob(pattern)}
    unshipped = [str(p.relative_to(MIGRATIONS)) for p in MIGRATIONS.glob("sql/**/*") if p.is_file()
                 and p not in shipped]
    assert not unshipped, f"pyproject's package-data for agentdesk.store.migrations misses {', '.join(unshipped)}"


FTS_AS_0006_RUNS_IT = "205efd83fb06d3ef7d438414d653b190e3e29896fed66aa7ebc9c59c71838943"
"""sha256 of repr((fts.CREATE, fts.MARK_ALL, fts.DROP)): what 0006_search runs from store/search/fts.py."""


def test_what_0006_runs_from_product_code_stays_as_it_was() -> None:
    """0006_search imports store/search/fts.py (the one landed revision that runs product code), so a change
    there changes 0006 for every store made afterwards and for none that ran it: the drift 0021 had to repair."""
    from agentdesk.store.search import fts

    ran = hashlib.sha256(repr((fts.CREATE, fts.MARK_ALL, fts.DROP)).encode()).hexdigest()
    assert ran == FTS_AS_0006_RUNS_IT, (
        "store/search/fts.py's CREATE, MARK_ALL or DROP changed, and 0006_search runs them: stores made from now "
        "on would differ from those that ran 0006. Keep them as they are and make the change in a new revision "
        "with its own SQL (and a repair for stores that have the old index, as sql/0021/sqlite_search.sql is).")
