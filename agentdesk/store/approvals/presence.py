"""Who else is looking at an approval: one row per database login, on PostgreSQL only (migration 0009_presence).

Why it stays cheap: a heartbeat is one upsert of the caller's own row and one
indexed read of the others looking at the same approval, in one short
transaction on the reading engine (not the writers' queue: presence never waits
behind a decision, and is neither in the change log nor audited). Rows expire by
age (`LIVE_S`, judged on the server's clock, so machines' clocks do not matter);
the window refreshes its row every `HEARTBEAT_S` while an approval stays
selected. Row-level security makes each login able to write only its own row
(the login column defaults to session_user), so one operator cannot make another
appear anywhere, even with a hand-written SQL client.

A row trigger NOTIFYs `CHANNEL` with approval ids only when a login arrives,
moves or leaves; `PresenceListener` hears them on its own connection and thread
(as the change listener does) and tells the window which approvals to re-read.
On SQLite (one operator) `presence_for` returns None and nothing is shown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.postgres.listener import IDLE_WAKE_S, NotifyLoop

log = logging.getLogger(__name__)

CHANNEL = "agentdesk_presence"
LIVE_S = 30.0
"""A row older than this is gone (the window closed, crashed or lost the network)."""
HEARTBEAT_S = 10.0
"""How often the window refreshes its row while an approval stays selected (a third of LIVE_S)."""
STATEMENT_TIMEOUT_MS = 2000

UPSERT = text(
    "INSERT INTO presence (approval_id) VALUES (:approval) ON CONFLICT (login) DO UPDATE "
    "SET approval_id = EXCLUDED.approval_id, seen_at = now()")
OTHERS = text(
    "SELECT login FROM presence WHERE approval_id = :approval AND login <> session_user "
    f"AND seen_at > now() - interval '{LIVE_S:g} seconds' ORDER BY login")
LEAVE = text("SELECT agentdesk_presence_leave()")
"""Through a function (migration 0012): a DELETE grant would also let any viewer LOCK the whole table."""


class PresenceUnavailable(Exception):
    """The server refused presence (no such table, no grant): the window stops showing it."""


class Presence:
    """Presence on one PostgreSQL store; every method is one short transaction (call off the GUI thread)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.writes = not store.read_only
        """A store opened read-only reads presence but never writes its own row."""

    def look(self, approval_id: str) -> list[str]:
        """Heartbeat: this login looks at `approval_id` now; returns the other logins looking at it."""
        return self._run(approval_id, write=self.writes)

    def others(self, approval_id: str) -> list[str]:
        """The other logins looking at `approval_id` within the last LIVE_S seconds (no write)."""
        return self._run(approval_id, write=False)

    def leave(self) -> None:
        """This login looks at nothing (no approval selected, the window closing)."""
        if not self.writes:
            return
        try:
            with self.store.engine.begin() as conn:
                self._timeout(conn)
                conn.execute(LEAVE)
        except DBAPIError as exc:
            raise PresenceUnavailable(_first_line(exc)) from exc

    def listen(self, on_ids: Callable[[set[str] | None], object]) -> PresenceListener:
        """Start hearing arrivals and departures; `on_ids` runs on the listener's thread."""
        listener = PresenceListener(self.store.url, on_ids)
        listener.start()
        return listener

    def _run(self, approval_id: str, *, write: bool) -> list[str]:
        try:
            with self.store.engine.begin() as conn:
                self._timeout(conn)
                if write:
                    conn.execute(UPSERT, {"approval": approval_id})
                return [str(row[0]) for row in conn.execute(OTHERS, {"approval": approval_id})]
        except DBAPIError as exc:
            raise PresenceUnavailable(_first_line(exc)) from exc

    @staticmethod
    def _timeout(conn: Any) -> None:
        conn.exec_driver_sql(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")


class PresenceListener(NotifyLoop):
    """LISTEN on the presence channel; hands each wake-up's approval ids (None: "re-read all") to `on_ids`.

    Reconnecting with back-off is NotifyLoop's; after a reconnect `on_ids(None)` says
    that anything may have changed while it was away.
    """

    def __init__(self, url: str, on_ids: Callable[[set[str] | None], object]) -> None:
        super().__init__(url, lambda: on_ids(None), lambda: 0, name="agentdesk-presence", channel=CHANNEL)
        self._on_ids = on_ids

    def _wait_and_read(self) -> None:
        ids: set[str] = set()
        for notify in self._conn.notifies(timeout=IDLE_WAKE_S):
            ids.update(notify.payload.split())
            break  # at once: someone arrived or left
        if ids:
            for notify in self._conn.notifies(timeout=0.02):  # and whatever came with it, as one wake-up
                ids.update(notify.payload.split())
            self._on_ids(ids)


def presence_for(source: object) -> Presence | None:
    """Presence for a native PostgreSQL store at a schema that has it; None otherwise (SQLite, foreign sources)."""
    store = getattr(source, "store", None)
    if not isinstance(store, Store) or not store.is_postgres:
        return None
    try:
        with store.engine.connect() as conn:
            exists = conn.execute(text("SELECT to_regclass('presence') IS NOT NULL")).scalar()
    except DBAPIError as exc:
        log.info("presence unavailable: %s", _first_line(exc))
        return None
    return Presence(store) if exists else None


def _first_line(exc: BaseException) -> str:
    message = str(getattr(exc, "orig", None) or exc).strip()
    return message.splitlines()[0] if message else type(exc).__name__
