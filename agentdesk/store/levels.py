"""Granting levels as an audited unit of work (kept apart from `roles` so the engine never imports the uow)."""

from __future__ import annotations

from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.postgres import roles
from agentdesk.store.uow import UnitOfWork


def grant_level(store: Store, login: str, level: str) -> None:
    """GRANT the level's group (and REVOKE the others) and audit it, in one transaction.

    The audit's actor is the database's `session_user`, not a name the caller claims.
    """
    roles.require_postgres(store.engine.dialect.name)
    with store.engine.connect() as probe:  # before the unit of work, whose writer's turn a viewer may not take
        roles.require_createrole(probe)
    with UnitOfWork(store) as uow:
        conn = uow.session.connection()
        roles.grant(conn, login, level)
        actor = roles.current_login(conn).name
        uow.audit(actor, "role.grant", "role", login, {"level": level, "group": roles.GROUP[level]})


def list_levels(store: Store) -> list[tuple[str, str]]:
    roles.require_postgres(store.engine.dialect.name)
    with store.engine.connect() as conn:
        return roles.list_logins(conn)
