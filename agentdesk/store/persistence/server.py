"""Writes the server does itself: on PostgreSQL the store's SECURITY DEFINER functions make the change.

Approvals and context edits share the switch and the adoption of the change-log rows those functions wrote.
"""

from __future__ import annotations

from typing import Any

from agentdesk.store.changes.bus import Change
from agentdesk.store.persistence.uow import UnitOfWork


def on_server(uow: UnitOfWork) -> bool:
    """True when the store's own functions do the write (PostgreSQL)."""
    return uow.store.is_postgres


def adopt_server_changes(uow: UnitOfWork, changes: Any) -> None:
    """The change-log rows a server function wrote (a JSON array), published by the unit of work."""
    uow.adopt([Change(c["entity"], c["op"], c["id"], dict(c["parents"] or {}), c["revision"], c["seq"],
                      c["origin"], c["at"]) for c in (changes or [])])
