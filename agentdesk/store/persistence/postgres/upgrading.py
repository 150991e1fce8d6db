"""Who may create or upgrade a PostgreSQL store, asked before a migration runs, and the sentence for the rest.

Why ask first: a migration run by a login that may not make it fails half-way through with the server's
words ("permission denied for schema public", "permission denied to create role"), which say neither what
is missing nor who has it. PostgreSQL answers each question from its catalogs, so `init` (and the first
writer's upgrade) can name the one privilege missing and the login that holds it, and change nothing.

What a migration needs (migrations 0005 and 0012 create the group roles, every revision creates tables and
grants on them): to be a superuser; or, to create a store, the database's owner (who may create in and
grant on schema `public`), with CREATEROLE while any of agentdesk's group roles is missing; to upgrade one,
the role that owns its tables (the login that created it).
"""

from __future__ import annotations

import shlex

from sqlalchemy import text
from sqlalchemy.engine import Connection

from agentdesk.store.errors import PermissionRefused, SchemaBehind, StoreError

GROUPS = ("agentdesk_viewer", "agentdesk_operator", "agentdesk_admin", "agentdesk_agent")

PRIVILEGES_SQL = text("""
    SELECT session_user::text, r.rolsuper, r.rolcreaterole, current_database()::text,
           pg_get_userbyid(d.datdba)::text, pg_has_role(session_user, d.datdba, 'USAGE'),
           has_schema_privilege(session_user, 'public', 'CREATE'),
           (SELECT pg_get_userbyid(c.relowner)::text FROM pg_class c
            WHERE c.oid = to_regclass('public.alembic_version')),
           coalesce((SELECT pg_has_role(session_user, c.relowner, 'USAGE') FROM pg_class c
                     WHERE c.oid = to_regclass('public.alembic_version')), false),
           ARRAY(SELECT g FROM unnest(CAST(:groups AS text[])) g WHERE NOT EXISTS (
                 SELECT 1 FROM pg_roles x WHERE x.rolname = g))
    FROM pg_roles r, pg_database d WHERE r.rolname = session_user AND d.datname = current_database()""")


STORE_OWNER_SQL = text("SELECT pg_get_userbyid(c.relowner)::text FROM pg_class c "
                       "WHERE c.oid = to_regclass('public.alembic_version')")
"""The role that ran the migrations (it owns every table): from the catalogs, which every login may read."""


def init_command(shown: str) -> str:
    return f"`agentdesk --store {shlex.quote(shown)} init`"


def owner_runs_init(url: str, owner: str | None) -> str:
    """"the database owner (alice) runs `agentdesk --store postgresql://alice@host/db init`": the URL with the
    owner's login, never the caller's (nor any password)."""
    if owner is None:
        return f"the database owner runs {init_command(_with_login(url, None))}"
    return f"the database owner ({owner}) runs {init_command(_with_login(url, owner))}"


def store_owner(conn: Connection) -> str | None:
    found = conn.execute(STORE_OWNER_SQL).scalar()
    return None if found is None else str(found)


def _with_login(url: str, login: str | None) -> str:
    from sqlalchemy.engine import make_url

    from agentdesk.store.persistence.postgres.engine import display, normalise
    try:
        parsed = make_url(normalise(url))._replace(username=login, password=None)  # set() skips None
        return display(parsed.render_as_string(hide_password=False))
    except Exception:  # an unparseable URL: shown as display() shows it
        return display(url)


def require_may_migrate(conn: Connection, current: str | None, head: str, url: str) -> None:
    """Refuse, before anything runs, a migration this login cannot finish."""
    (login, superuser, createrole, database, db_owner, owns_db, may_create, store_owner, owns_store,
     missing) = conn.execute(PRIVILEGES_SQL, {"groups": list(GROUPS)}).one()
    if superuser:
        return
    if current is not None:
        if not owns_store:
            raise SchemaBehind(current, head, owner_runs_init(url, store_owner))
        _require_create(login, may_create, _with_login(url, login))
        _require_createrole(login, createrole, missing)
        return
    if not owns_db:
        raise PermissionRefused(
            f"{login} may not create the agentdesk schema in database {database}: init needs a superuser or the "
            f"database's owner ({db_owner}), so {db_owner} runs {init_command(_with_login(url, db_owner))}, or a "
            f"superuser runs ALTER DATABASE {_quoted(database)} OWNER TO {_quoted(login)}.")
    _require_create(login, may_create, _with_login(url, login))
    _require_createrole(login, createrole, missing)


def _require_create(login: str, may_create: bool, shown: str) -> None:
    if not may_create:
        raise PermissionRefused(
            f"{login} lacks CREATE on schema public, which agentdesk's tables need: a superuser or the schema's "
            f"owner runs GRANT CREATE ON SCHEMA public TO {_quoted(login)}, then {init_command(shown)}.")


def _require_createrole(login: str, createrole: bool, missing: list[str]) -> None:
    if missing and not createrole:
        raise PermissionRefused(
            f"{login} lacks CREATEROLE, which creating agentdesk's group role{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} needs: a superuser runs ALTER ROLE {_quoted(login)} CREATEROLE (or creates "
            "them), or init runs as a superuser.")


def _quoted(name: str) -> str:
    return name if name.isidentifier() and name.islower() else '"' + name.replace('"', '""') + '"'


AGENT_LEVEL_SINCE = "0012_least_privilege"
"""The revision that gave agentdesk_agent its grants (alembic_version included): before it, an agent login
cannot even read which revision the store is at."""
GROUP_MEMBER_SQL = text(
    "SELECT session_user::text, EXISTS (SELECT 1 FROM pg_roles g WHERE g.rolname = ANY (CAST(:groups AS text[])) "
    "AND pg_has_role(session_user, g.oid, 'MEMBER'))")


def unreadable_version(conn: Connection, head: str, url: str) -> StoreError:
    """Why this login may not read the store's version stamp, as the error to raise (`conn`: rolled back).

    A login in one of agentdesk's groups reads it on every store from 0012 on, so such a login refused is on an
    older store; a login in no group is told how it gets a level."""
    login, member = conn.execute(GROUP_MEMBER_SQL, {"groups": list(GROUPS)}).one()
    if member:
        return SchemaBehind(f"a revision before {AGENT_LEVEL_SINCE}", head, owner_runs_init(url, store_owner(conn)))
    return PermissionRefused(
        f"{login} holds no agentdesk level on this store: a login with CREATEROLE runs "
        f"`agentdesk --store URL admin role grant {login} viewer` (or agent, operator, admin).")
