"""After opening, check that the tables a store's version stamp promises are really there.

`alembic_version` says which migrations ran, not that their tables survived: a store whose
`approvals` table was dropped (by hand, a bad restore, another tool) still says "head". Such
a store must be refused before anything is written to it, or `init` reports it ready and
the first writer fails halfway through its work. The check compares the database with
agentdesk's own table definitions (`store.schema`), names and columns, at the head revision
only (an older store opened read-only legitimately has fewer).
"""

from __future__ import annotations

from sqlalchemy import Engine, inspect

from agentdesk.store.errors import AuditChainBroken, StoreUnavailable
from agentdesk.store.persistence.schema import Base

AUDIT_TABLE = "audit_log"


def check_schema(engine: Engine, name: str, version: str | None, head: str, *,
                 audit_optional: bool = False) -> str | None:
    """`version`, after refusing a store at `head` whose tables or columns are not all there.

    A store whose only loss is its audit table had its audit log removed: that is tampering (exit 6) for
    anything that would write to it; read-only (`audit_optional`) it opens, so `verify` can say what the
    anchor saw and the rest can still be read."""
    if version is None or version != head:
        return version
    name = name.removeprefix("sqlite:///")
    inspector = inspect(engine)
    present = set(inspector.get_table_names())
    lost = {t.name for t in Base.metadata.sorted_tables} - present
    if lost == {AUDIT_TABLE}:
        if audit_optional:
            present.add(AUDIT_TABLE)
        else:
            raise AuditChainBroken(
                f"The store {name} has lost its audit table ({AUDIT_TABLE}): its audit log was removed. Nothing "
                "was changed; `agentdesk verify` says what the anchor saw.")
    for table in Base.metadata.sorted_tables:
        if table.name == AUDIT_TABLE and lost == {AUDIT_TABLE}:
            continue
        if table.name not in present:
            raise StoreUnavailable(
                f"The store {name} is damaged: its {table.name} table is missing although its schema stamp "
                f"({version}) says it has one. Nothing was changed; restore it from a backup or use a new store.")
        columns = {c["name"] for c in inspector.get_columns(table.name)}
        missing = [c.name for c in table.columns if c.name not in columns]
        if missing:
            raise StoreUnavailable(
                f"The store {name} is damaged: its {table.name} table lacks column(s) {', '.join(missing)} that "
                f"schema {version} has. Nothing was changed; restore it from a backup or use a new store.")
    return version
