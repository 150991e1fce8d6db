"""A database's schema as plain, comparable values: what the migration history test compares.

Why not alembic's compare_metadata: it knows tables, columns and indexes, not triggers, grants,
row-level security or function bodies, which are most of what the PostgreSQL revisions write.
Each section is a sorted list of tuples, so two snapshots compare with `==` and a difference can
be named section by section (`differences`).
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

Snapshot = dict[str, list[tuple[Any, ...]]]

PG_SECTIONS: dict[str, str] = {
    "columns": """
        SELECT c.table_name, c.column_name, c.data_type, c.is_nullable, coalesce(c.column_default, ''),
               coalesce(c.character_maximum_length, 0)
        FROM information_schema.columns c WHERE c.table_schema = 'public'""",
    "tables": """
        SELECT c.relname, c.relkind, c.relrowsecurity, c.relforcerowsecurity FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')""",
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'",
    "constraints": """
        SELECT c.conrelid::regclass::text, c.conname, c.contype, pg_get_constraintdef(c.oid), c.condeferrable,
               c.condeferred
        FROM pg_constraint c WHERE c.connamespace = 'public'::regnamespace""",
    "triggers": """
        SELECT t.tgrelid::regclass::text, t.tgname, pg_get_triggerdef(t.oid), t.tgenabled FROM pg_trigger t
        JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal""",
    "policies": """
        SELECT tablename, policyname, permissive, roles::text, cmd, coalesce(qual, ''), coalesce(with_check, '')
        FROM pg_policies WHERE schemaname = 'public'""",
    "sequences": """
        SELECT sequencename, data_type::text, increment_by, max_value FROM pg_sequences WHERE schemaname = 'public'""",
    "views": "SELECT viewname, definition FROM pg_views WHERE schemaname = 'public'",
    "table grants": """
        SELECT c.relname, CASE WHEN a.grantee = 0 THEN 'PUBLIC' WHEN a.grantee = c.relowner THEN 'owner'
               ELSE pg_get_userbyid(a.grantee) END, a.privilege_type, a.is_grantable
        FROM pg_class c, aclexplode(c.relacl) a
        WHERE c.relnamespace = 'public'::regnamespace AND c.relacl IS NOT NULL""",
    "column grants": """
        SELECT c.relname, t.attname, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END,
               a.privilege_type
        FROM pg_attribute t JOIN pg_class c ON c.oid = t.attrelid, aclexplode(t.attacl) a
        WHERE c.relnamespace = 'public'::regnamespace AND t.attacl IS NOT NULL""",
    "function grants": """
        SELECT p.oid::regprocedure::text, CASE WHEN a.grantee = 0 THEN 'PUBLIC' WHEN a.grantee = p.proowner
               THEN 'owner' ELSE pg_get_userbyid(a.grantee) END, a.privilege_type
        FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
        WHERE p.pronamespace = 'public'::regnamespace""",
    "schema grants": """
        SELECT n.nspname, CASE WHEN a.grantee = 0 THEN 'PUBLIC' WHEN a.grantee = n.nspowner THEN 'owner'
               ELSE pg_get_userbyid(a.grantee) END, a.privilege_type
        FROM pg_namespace n, aclexplode(n.nspacl) a WHERE n.nspname = 'public'""",
    "default privileges": """
        SELECT d.defaclobjtype::text, CASE WHEN a.grantee = 0 THEN 'PUBLIC' WHEN a.grantee = d.defaclrole
               THEN 'owner' ELSE pg_get_userbyid(a.grantee) END, a.privilege_type
        FROM pg_default_acl d, aclexplode(d.defaclacl) a
        WHERE d.defaclnamespace = 'public'::regnamespace""",
    "functions": """
        SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid) FROM pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace AND p.prokind IN ('f', 'p')""",
    "types": """
        SELECT t.typname, t.typtype::text FROM pg_type t
        WHERE t.typnamespace = 'public'::regnamespace AND t.typtype IN ('e', 'd')""",
}


def postgres_snapshot(conn: Any) -> Snapshot:
    """`conn`: a psycopg connection to the database (any login that may read the catalogs)."""
    return {name: sorted((tuple(row) for row in conn.execute(query).fetchall()), key=repr)
            for name, query in PG_SECTIONS.items()}


_CHECK = re.compile(r"CONSTRAINT\s+(\S+)\s+CHECK\s*\((.*?)\)\s*(?:,|\)\s*$)", re.S | re.I)


def sqlite_snapshot(conn: sqlite3.Connection) -> Snapshot:
    """Tables, columns (type, NOT NULL, default, key), indexes, foreign keys, CHECKs and triggers of a file.

    Columns and indexes come from the pragmas, not sqlite_master's text: a table rebuilt by a batch migration
    reads differently from one created at head while meaning the same; triggers are compared as written."""
    objects = conn.execute("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master").fetchall()
    tables = sorted(name for kind, name, _, _ in objects if kind == "table" and not name.startswith("sqlite_"))
    snap: Snapshot = {"tables": [(t,) for t in tables], "columns": [], "indexes": [], "constraints": [],
                      "triggers": []}
    for table in tables:
        quoted = table.replace('"', '""')
        for _cid, name, kind, notnull, default, pk in conn.execute(f'PRAGMA table_info("{quoted}")'):
            snap["columns"].append((table, name, kind.upper(), notnull, default or "", pk))
        for _, index, unique, origin, partial in conn.execute(f'PRAGMA index_list("{quoted}")'):
            cols = tuple(r[2] for r in conn.execute(f'PRAGMA index_info("{index}")'))
            shown = index if origin == "c" else f"({origin}) {cols}"
            snap["indexes"].append((table, shown, unique, origin, partial, cols))
        for fk in conn.execute(f'PRAGMA foreign_key_list("{quoted}")'):
            snap["constraints"].append((table, "foreign key", fk[2], fk[3], fk[4] or "", fk[5], fk[6]))
        sql = next(s for kind, name, _, s in objects if kind == "table" and name == table)
        for name, check in _CHECK.findall(sql):
            snap["constraints"].append((table, "check", name.strip('"'), " ".join(check.split())))
    snap["triggers"] = [(table, name, " ".join(sql.split())) for kind, name, table, sql in objects
                        if kind == "trigger"]
    snap["indexes"] += [(table, name, "sql", " ".join(sql.split())) for kind, name, table, sql in objects
                        if kind == "index" and sql]
    return {name: sorted(rows, key=repr) for name, rows in snap.items()}


def differences(upgraded: Snapshot, fresh: Snapshot, limit: int = 12) -> list[str]:
    """Each row one side has and the other lacks, named by section: empty when the schemas are equal."""
    found: list[str] = []
    for section in sorted(set(upgraded) | set(fresh)):
        ours, theirs = set(upgraded.get(section, [])), set(fresh.get(section, []))
        found += [f"{section}: only after the upgrade: {row}" for row in sorted(ours - theirs, key=repr)]
        found += [f"{section}: only in a fresh database: {row}" for row in sorted(theirs - ours, key=repr)]
    return found[:limit] + ([f"... and {len(found) - limit} more"] if len(found) > limit else [])
