"""Who may do what on a PostgreSQL store: the three group roles, granting them, and the current login's level.

The database enforces the roles (grants in migration 0005_postgres): a viewer's
login cannot write a table whatever client it uses. This module only manages
membership and tells the window, once at open, what the current login may do so
it can grey out the rest. SQLite has no logins: every level question answers None,
meaning "everything allowed", as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from agentdesk.store.errors import InvalidInput, NotFound, StoreUnavailable, Unsupported

LEVELS = ("viewer", "operator", "admin")
GROUP = {level: f"agentdesk_{level}" for level in LEVELS}
"""`agentdesk_admin` is the same name `store/rules/commands.py` checks (ADMIN_ROLE) before a rule edit."""

LEVEL_SQL = text(
    "SELECT session_user::text, r.rolsuper, pg_has_role(session_user, 'agentdesk_admin', 'MEMBER'), "
    "pg_has_role(session_user, 'agentdesk_operator', 'MEMBER'), "
    "pg_has_role(session_user, 'agentdesk_viewer', 'MEMBER') FROM pg_roles r WHERE r.rolname = session_user")
LIST_SQL = text(
    "SELECT m.rolname, g.rolname FROM pg_auth_members a JOIN pg_roles g ON g.oid = a.roleid "
    "JOIN pg_roles m ON m.oid = a.member WHERE g.rolname IN ('agentdesk_viewer', 'agentdesk_operator', "
    "'agentdesk_admin') AND m.rolname NOT LIKE 'agentdesk\\_%' ORDER BY m.rolname, g.rolname")


@dataclass(frozen=True, slots=True)
class Login:
    """The current database login and the highest agentdesk level it holds (None: none of ours)."""

    name: str
    level: str | None

    def may(self, level: str) -> bool:
        return self.level is not None and LEVELS.index(self.level) >= LEVELS.index(level)


def current_login(conn: Connection) -> Login:
    """Superusers count as admins; a login in no agentdesk group may do nothing but what grants allow."""
    name, superuser, admin, operator, viewer = conn.execute(LEVEL_SQL).one()
    level = "admin" if superuser or admin else "operator" if operator else "viewer" if viewer else None
    return Login(str(name), level)


def list_logins(conn: Connection) -> list[tuple[str, str]]:
    """(login, level) for every role directly in an agentdesk group, highest level per login."""
    best: dict[str, str] = {}
    for member, group in conn.execute(LIST_SQL).all():
        level = group.removeprefix("agentdesk_")
        if member not in best or LEVELS.index(level) > LEVELS.index(best[member]):
            best[member] = level
    return sorted(best.items())


def grant(conn: Connection, login: str, level: str) -> None:
    """Make `login` exactly a `level`: join that group, leave the other two (one transaction)."""
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
    except DBAPIError as exc:
        if "permission denied" in str(exc.orig).lower() or "must have admin option" in str(exc.orig).lower():
            raise StoreUnavailable("Only a PostgreSQL superuser or a role with CREATEROLE may grant agentdesk "
                                   "levels.") from exc
        raise


def require_postgres(dialect: str) -> None:
    if dialect != "postgresql":
        raise Unsupported("Roles exist only on a PostgreSQL store; a SQLite store has one user, who may do "
                          "everything.")
