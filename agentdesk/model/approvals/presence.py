"""Who else is looking at the selected approval (PostgreSQL team stores; nothing on SQLite).

The queue tells `look_at` what is selected; this model writes the heartbeat (one
upsert, `store.postgres.presence`) on the store runner at once and every
`HEARTBEAT_S` while the selection stays, and re-reads the others when the
presence listener (its own thread and connection) says someone arrived at or
left the approval shown. Nothing here blocks the GUI thread: finding out whether
the store has presence, starting the listener, every write and read go through
the runner, and a newer selection cancels the read of an older one (`LatestTask`).
If the server refuses presence (an old schema, a login without grants) the
model goes quiet for the rest of the session rather than showing errors: it is
a courtesy, never in the way of a decision.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, QObject, QTimer, Signal

from agentdesk.model.plain import shown_line
from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask, spawn
from agentdesk.store.approvals.presence import HEARTBEAT_S, Presence, PresenceListener, presence_for

log = logging.getLogger(__name__)


def _connect(source: object, on_ids: object) -> tuple[Presence, PresenceListener] | None:
    """On the runner: presence for this store (None on SQLite or an old schema) and its listener, started."""
    presence = presence_for(source)
    if presence is None:
        return None
    return presence, presence.listen(on_ids)  # type: ignore[arg-type]


class PresenceModel(QObject):
    changed = Signal(str, list)
    """(approval id, the other logins looking at it, sorted); ("", []) when nothing is shown."""
    _heard = Signal(object)
    """From the listener's thread: the approval ids whose watchers changed (None: any)."""

    def __init__(self, services: Services, parent: QObject | None = None, *,
                 heartbeat_s: float = HEARTBEAT_S) -> None:
        super().__init__(parent)
        self._services = services
        self._presence: Presence | None = None
        self._listener: PresenceListener | None = None
        self._ready = False
        self._current = ""
        self._shown: tuple[str, list[str]] = ("", [])
        self._latest = LatestTask(services.runner, on_error=self._unavailable)
        self._heartbeat = QTimer(self)
        self._heartbeat.setInterval(int(heartbeat_s * 1000))
        self._heartbeat.timeout.connect(self._beat)
        self._heard.connect(self._on_heard)
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.close)
        spawn(self._connect(), on_error=self._unavailable)

    @property
    def active(self) -> bool:
        """The store has presence and the server accepted it so far."""
        return self._presence is not None

    @property
    def ready(self) -> bool:
        """The store has answered whether it has presence (until then `active` says nothing)."""
        return self._ready

    @property
    def shown(self) -> tuple[str, list[str]]:
        return self._shown

    def look_at(self, approval_id: str | None) -> None:
        """The operator selected this approval (None: none); same id again is not a new heartbeat."""
        approval_id = approval_id or ""
        if approval_id == self._current:
            return
        self._current = approval_id
        self._show(approval_id, [])
        if self._presence is None:
            return
        if approval_id:
            self._beat()
            self._heartbeat.start()
        else:
            self._heartbeat.stop()
            self._latest.cancel()
            presence = self._presence
            spawn(self._services.runner.run(presence.leave), on_error=self._unavailable)

    def close(self) -> None:
        """Stop listening and leave (the row would expire by itself within LIVE_S anyway)."""
        self._heartbeat.stop()
        listener, self._listener = self._listener, None
        presence, self._presence = self._presence, None
        if listener is not None:
            listener.stop()
        if presence is not None and self._current:
            try:
                presence.leave()
            except Exception as exc:  # closing: the server may already be gone; the row expires on its own
                log.info("presence: could not leave: %s", exc)

    # -- store work, awaited on the qasync loop ----------------------------------------------
    async def _connect(self) -> None:
        found = await self._services.runner.run(_connect, self._services.source, self._heard.emit)
        self._ready = True
        if found is None:
            return
        self._presence, self._listener = found
        if self._current:  # selected before the store answered
            self._beat()
            self._heartbeat.start()

    def _beat(self) -> None:
        if self._presence is None or not self._current:
            return
        approval_id = self._current
        self._latest.start(self._ask(self._presence.look, approval_id))

    async def _ask(self, ask: Callable[[str], list[str]], approval_id: str) -> None:
        self._show(approval_id, await self._services.runner.run(ask, approval_id))

    def _on_heard(self, ids: set[str] | None) -> None:
        if self._presence is None or not self._current or (ids is not None and self._current not in ids):
            return
        approval_id = self._current
        self._latest.start(self._ask(self._presence.others, approval_id))

    def _show(self, approval_id: str, others: list[str]) -> None:
        if approval_id != self._current:
            return
        shown = (approval_id, list(others))
        if shown != self._shown:
            self._shown = shown
            self.changed.emit(*shown)

    def _unavailable(self, exc: BaseException) -> None:
        log.info("presence switched off for this window: %s", exc)
        self._heartbeat.stop()
        self._presence = None
        listener, self._listener = self._listener, None
        if listener is not None:
            spawn(self._services.runner.run(listener.stop),  # joins its thread: not on the GUI thread
                  error_signal=self._services.runner.error)
        self._show(self._current, [])


SHOWN_NAMES = 4


def also_looking(logins: list[str]) -> str:
    """"also looking: bob, carol" ("" for nobody); past four names, "and N more". Logins are plain text."""
    if not logins:
        return ""
    names = [shown_line(login, 40) for login in logins[:SHOWN_NAMES]]
    more = len(logins) - len(names)
    return "also looking: " + ", ".join(names) + (f" and {more} more" if more else "")
