"""Who may do what on a PostgreSQL store: the four group roles, granting them, and the current login's level.

The database enforces the roles (grants and functions in migrations 0005_postgres, 0008 and
0012_least_privilege): a viewer's login cannot write a table whatever client it uses, an agent's can
only append what a runtime writes, an operator's writes only through agentdesk's functions. This module
only manages
membership and tells the window, once at open, what the current login may do so
it can grey out the rest. SQLite has no logins: every level question answers None,
meaning "everything allowed", as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from agentdesk.store.errors import InvalidInput, NotFound, PermissionRefused, Unsupported

LEVELS = ("agent", "viewer", "operator", "admin")
"""Display order. `agent` is beside the others, not below them: it writes what a runtime writes (which no
viewer, operator or admin may write directly) and may not decide; viewer < operator < admin as before."""
GROUP = {level: f"agentdesk_{level}" for level in LEVELS}
"""`agentdesk_admin` is the same name `store/rules/commands.py` checks (ADMIN_ROLE) before a rule edit."""
RANKED = ("viewer", "operator", "admin")
"""The levels that include each other (an admin is an operator is a viewer)."""
ARTICLE = {"agent": "an agent", "viewer": "a viewer", "operator": "an operator", "admin": "an admin"}

LEVEL_SQL = text(
    "SELECT session_user::text, r.rolsuper, pg_has_role(session_user, 'agentdesk_admin', 'MEMBER'), "
    "pg_has_role(session_user, 'agentdesk_operator', 'MEMBER'), "
    "pg_has_role(session_user, 'agentdesk_viewer', 'MEMBER'), "
    "EXISTS (SELECT 1 FROM pg_roles g WHERE g.rolname = 'agentdesk_agent' "
    "        AND pg_has_role(session_user, g.oid, 'MEMBER')), "
    "coalesce((SELECT pg_has_role(session_user, c.relowner, 'MEMBER') FROM pg_class c "
    "          WHERE c.oid = to_regclass('public.approvals')), false) "
    "FROM pg_roles r WHERE r.rolname = session_user")
LIST_SQL = text(
    "SELECT m.rolname, g.rolname FROM pg_auth_members a JOIN pg_roles g ON g.oid = a.roleid "
    "JOIN pg_roles m ON m.oid = a.member WHERE g.rolname IN ('agentdesk_viewer', 'agentdesk_operator', "
    "'agentdesk_admin', 'agentdesk_agent') AND m.rolname NOT LIKE 'agentdesk\\_%' ORDER BY m.rolname, g.rolname")


@dataclass(frozen=True, slots=True)
class Login:
    """The current database login and the highest agentdesk level it holds (None: none of ours)."""

    name: str
    level: str | None
    owner: bool = False
    """A superuser or the store's owner (the role that migrated it): above every level, runtime writes included."""

    def may(self, level: str) -> bool:
        """Whether this login holds `level`: the owner holds all; an agent only `agent`; admin > operator > viewer."""
        if self.owner:
            return True
        if self.level is None:
            return False
        if level == "agent" or self.level == "agent":
            return self.level == level
        return RANKED.index(self.level) >= RANKED.index(level)

    def refusal(self, doing: str, needs: str) -> str:
        """The one sentence a refused write says: "carol is a viewer; deciding needs operator"."""
        held = ARTICLE.get(self.level or "", "in no agentdesk group")
        return f"{self.name} is {held}; {doing} needs {needs}."


def current_login(conn: Connection) -> Login:
    """Superusers and the store's owner count as admins; a login in no agentdesk group may do nothing but what
    grants allow."""
    name, superuser, admin, operator, viewer, agent, owner = conn.execute(LEVEL_SQL).one()
    level = ("admin" if superuser or admin or owner else "operator" if operator else "viewer" if viewer
             else "agent" if agent else None)
    return Login(str(name), level, bool(superuser or owner))


def require(login: Login | None, level: str, doing: str) -> None:
    """Refuse before anything is written when the login's level cannot do this (None: SQLite, one user)."""
    if login is not None and not login.may(level):
        raise PermissionRefused(login.refusal(doing, level))


REFUSAL = re.compile(r"^\S+ (is|was) .+; .+ needs .+")
"""The sentence agentdesk's functions and triggers raise (migration 0012, agentdesk_refuse)."""
TABLE = re.compile(r"permission denied for (table|relation|sequence|function) (\S+)")


def refusal_from(message: str, login: Login | None) -> str:
    """A server's refusal (SQLSTATE 42501) as one sentence naming the level needed, never the driver's text."""
    first = message.strip().splitlines()[0] if message.strip() else message
    if REFUSAL.match(first):
        return first.rstrip(".") + "."
    who = login or Login("this login", None)
    found = TABLE.search(first)
    if found is None:
        return who.refusal("that", "a higher level")
    kind, name = found.groups()
    if kind == "function":
        return who.refusal(f"calling {name}", "a higher level")
    if kind == "sequence":
        return who.refusal(f"drawing from {name}", "the store's owner")
    return who.refusal(f"writing {name} directly", "agent" if name in RUNTIME_TABLES else "agentdesk's functions")


RUNTIME_TABLES = frozenset({"projects", "tasks", "sessions", "agents", "runs", "spans", "span_context_items",
                            "tool_calls", "approvals", "context_groups", "context_items", "context_item_revisions",
                            "otel_orphans", "import_staging", "otel_resources"})


def list_logins(conn: Connection) -> list[tuple[str, str]]:
    """(login, level) for every role directly in an agentdesk group, highest level per login."""
    best: dict[str, str] = {}
    for member, group in conn.execute(LIST_SQL).all():
        level = group.removeprefix("agentdesk_")
        if member not in best or LEVELS.index(level) > LEVELS.index(best[member]):
            best[member] = level
    return sorted(best.items())


def grant(conn: Connection, login: str, level: str) -> None:
    """Make `login` exactly a `level`: join that group, leave the other three (one transaction)."""
    if level not in LEVELS:
        raise InvalidInput(f"{level!r} is not a level; choose one of {', '.join(LEVELS)}.")
    exists = conn.execute(text("SELECT rolcanlogin FROM pg_roles WHERE rolname = :n"), {"n": login}).scalar()
    if exists is None:
        raise NotFound(f"There is no PostgreSQL login {login!r}; create it first "
                       f"(CREATE ROLE \"{login}\" LOGIN PASSWORD '…').")
    if login.startswith("agentdesk_"):
        raise InvalidInput(f"{login} is one of agentdesk's group roles, not a person's login.")
    quoted = conn.dialect.identifier_preparer.quote(login)
    try:
        for other in LEVELS:
            if other != level:
                conn.execute(text(f"REVOKE {GROUP[other]} FROM {quoted}"))
        conn.execute(text(f"GRANT {GROUP[level]} TO {quoted}"))
        if level == "agent":  # a stuck runtime cannot hold the writers' turn for long (a hostile one may SET it)
            database = conn.dialect.identifier_preparer.quote(str(conn.execute(text("SELECT current_database()"))
                                                                  .scalar()))
            conn.execute(text(f"ALTER ROLE {quoted} IN DATABASE {database} SET idle_in_transaction_session_timeout "
                              f"= '{AGENT_IDLE_IN_TRANSACTION}'"))
    except DBAPIError as exc:
        if "permission denied" in str(exc.orig).lower() or "must have admin option" in str(exc.orig).lower():
            raise PermissionRefused(NO_CREATEROLE) from exc  # the transaction is aborted: nothing more to ask
        raise


AGENT_IDLE_IN_TRANSACTION = "10s"
"""An agent login's sessions in this database end a transaction left idle this long (`admin role grant … agent`):
a runtime that hangs inside a write stops delaying people's writes after it. A session setting, so it bounds a
stuck runtime, not a hostile one (docs/postgres.md, threat model)."""
GRANTS_ROLES = text("SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = session_user")
MAY_GRANT_SQL = text(
    "SELECT r.rolname::text, r.rolsuper, r.rolname = coalesce((SELECT pg_get_userbyid(c.relowner) FROM pg_class c "
    "WHERE c.oid = to_regclass('public.alembic_version')), '') AS owner FROM pg_roles r "
    "WHERE r.rolcanlogin AND (r.rolsuper OR r.rolcreaterole) ORDER BY 3 DESC, 2, 1 LIMIT 4")
NO_CREATEROLE = "Only a PostgreSQL superuser or a role with CREATEROLE may grant agentdesk levels."
"""The sentence when nothing better can be said (the server would not answer who may)."""


def who_may_grant(conn: Connection) -> str:
    """The sentence a login that may not grant levels gets: what it lacks and which logins have it.

    Why it names them: agentdesk's own admin level rules the store, not PostgreSQL's roles, so an admin
    refused here needs to know whom to ask (the store's owner when it has CREATEROLE, else a superuser).
    """
    login = str(conn.execute(text("SELECT session_user")).scalar())
    found = conn.execute(MAY_GRANT_SQL).all()
    names = [(f"the store's owner {name}" if owner else name) + (" (a superuser)" if superuser else "")
             for name, superuser, owner in found if name != login]
    such_as = ", ".join(names[:3]) if names else "a superuser"
    return (f"{login} may not grant levels: granting levels needs a login with CREATEROLE, such as {such_as}; "
            f"run `agentdesk admin role grant` as one of them, or have a superuser run ALTER ROLE "
            f"{conn.dialect.identifier_preparer.quote(login)} CREATEROLE.")


def require_createrole(conn: Connection) -> None:
    if not conn.execute(GRANTS_ROLES).scalar():
        raise PermissionRefused(who_may_grant(conn))


def require_postgres(dialect: str) -> None:
    if dialect != "postgresql":
        raise Unsupported("Roles exist only on a PostgreSQL store; a SQLite store has one user, who may do "
                          "everything.")
