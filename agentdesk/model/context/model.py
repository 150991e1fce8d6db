"""One agent's context window as a Qt tree model (see `tree` for its shape).

The cache only changes when a reload arrives: commands go to the source's
`ContextWriter` through the runner, and the bus event (or the command's
completion) reloads. The row cache and the diff that applies each reload live in
`rows`, what a row shows in `display`, and why a command is refused in `rules`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from PySide6.QtCore import QModelIndex, QObject, Qt, QTimer, Signal
from qasync import asyncSlot

from agentdesk.model.context import rules as context_rules
from agentdesk.model.context.display import AddedAfterRole, CoveredRole, ItemIdRole, NodeTypeRole, RowDisplay
from agentdesk.model.context.rows import HEADERS, KIND, LOCKED, PREVIEW, ROLE, TOKENS, VISIBLE, ContextRows, Index
from agentdesk.model.context.tree import GroupRow, ItemRow, Row, build_tree
from agentdesk.model.runner import OnDone, OnError
from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask
from agentdesk.store import readmodel as rm
from agentdesk.store.ingest.writer import IMPORTED_AGENT_PREFIX
from agentdesk.store.messages.desk import message_desk
from agentdesk.store.persistence.bus import RESET, Change
from agentdesk.store.source import Capability, ContextWriter, Source, require_context_writer

__all__ = ["HEADERS", "KIND", "LOCKED", "PREVIEW", "ROLE", "TOKENS", "VISIBLE", "AddedAfterRole",
           "ContextModel", "CoveredRole", "GroupRow", "ItemIdRole", "ItemRow", "NodeTypeRole"]

log = logging.getLogger(__name__)
NO_PARENT = QModelIndex()
RELOAD_DEBOUNCE_MS = 40
"""A reload waits this long after the latest change, so a burst costs one read..."""
RELOAD_MAX_WAIT_MS = 150
"""...but never longer than this after the first change it has not read yet: a busy agent's
context, changing every few milliseconds, still reloads several times a second."""


class Loaded(NamedTuple):
    context: rm.AgentContext
    agent: rm.Agent | None
    """None when the source could not name the agent: views then show its id."""
    authors: dict[str, str] = {}
    """item id -> the operator who wrote it, for items that are delivered operators' messages."""


def load(source: Source, agent_id: str) -> Loaded:
    """Runs on the runner's pool: the snapshot and the agent it belongs to, in one round trip."""
    context = source.context(agent_id)
    agent: rm.Agent | None
    try:
        agent = source.agent(agent_id)
    except Exception:  # the name is only a label: a source that cannot give it must not hide the context
        log.debug("no agent row for %s", agent_id, exc_info=True)
        agent = None
    desk = message_desk(source)
    users = [i.id for i in context.items if i.role == "user"]
    authors = desk.authors(users) if desk is not None and users else {}
    return Loaded(context, agent if agent is not None and agent.id == agent_id else None, authors)


def run_command(source: Source, capability: Capability, command: Callable[[ContextWriter], Any]) -> Any:
    """Runs on the runner's pool: the command against the source's writer (`Unsupported` if none)."""
    return command(require_context_writer(source, capability))


class ContextModel(ContextRows):
    reloaded = Signal()
    """A snapshot was applied (also after the first load of an agent)."""
    command_failed = Signal(object, int)
    """A command without its own `on_error` failed: the exception and the context revision it started from."""
    load_failed = Signal(str)

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._latest = LatestTask(services.runner, on_error=lambda exc: self.load_failed.emit(str(exc)))
        self._display = RowDisplay(lambda row, column: context_rules.toggle_refusal(self, row, column))
        self._snapshot: rm.AgentContext | None = None
        self._agent: rm.Agent | None = None
        self._agent_id: str | None = None
        self._as_of: datetime | None = None
        self._timer = QTimer(self, singleShot=True, interval=RELOAD_DEBOUNCE_MS)
        self._timer.timeout.connect(self.reload)
        self._pending_since: float | None = None
        """When the first change not yet reloaded arrived (monotonic seconds), or None."""
        self._closed = False
        services.bridge.changes.connect(self._on_changes)

    def close(self) -> None:
        """Stop reloading (before the services shut down); the model keeps what it shows."""
        self._closed = True
        self._timer.stop()
        self._latest.cancel()

    # -- what is shown ---------------------------------------------------------------------
    @property
    def agent_id(self) -> str | None:
        return self._agent_id

    @property
    def agent(self) -> rm.Agent | None:
        """The agent as loaded with the last snapshot (None until then, or if the source cannot name it)."""
        return self._agent

    @property
    def snapshot(self) -> rm.AgentContext | None:
        return self._snapshot

    @property
    def as_of(self) -> datetime | None:
        return self._as_of

    @property
    def context_revision(self) -> int:
        """The revision the operator is looking at: what a command's conflict check starts from."""
        return self._snapshot.context_revision if self._snapshot else 0

    def set_agent(self, agent_id: str | None, as_of: datetime | None = None) -> None:
        self._latest.cancel()
        self._timer.stop()
        self._pending_since = None
        self.beginResetModel()
        self._agent_id, self._snapshot, self._agent, self._as_of = agent_id, None, None, _aware(as_of)
        self._clear_rows()
        self.endResetModel()
        if agent_id is not None:
            self.reload()

    def schedule_reload(self) -> None:
        """Reload soon: `RELOAD_DEBOUNCE_MS` after this call, or earlier when the first pending
        change would otherwise wait more than `RELOAD_MAX_WAIT_MS`."""
        if self._agent_id is None:
            return
        now = time.monotonic()
        if self._pending_since is None:
            self._pending_since = now
        left_ms = RELOAD_MAX_WAIT_MS - (now - self._pending_since) * 1000
        self._timer.start(max(0, min(RELOAD_DEBOUNCE_MS, int(left_ms))))

    def reload(self) -> None:
        self._pending_since = None
        if self._agent_id is None or self._closed:
            return
        self._latest.start(self._load(self._agent_id))

    async def _load(self, agent_id: str) -> None:
        self._apply(await self._services.runner.run(load, self._services.source, agent_id))

    def _apply(self, loaded: Loaded) -> None:
        ctx = loaded.context
        if ctx.agent_id != self._agent_id:
            return
        self._snapshot, self._agent = ctx, loaded.agent
        self._apply_tree(build_tree(ctx, self._as_of, loaded.authors))
        self.reloaded.emit()

    def _on_changes(self, changes: Sequence[Change]) -> None:
        if self._agent_id is not None and any(self._concerns(c) for c in changes):
            self.schedule_reload()

    def _concerns(self, change: Change) -> bool:
        return change.op == RESET or change.parent("agent") == self._agent_id or (
            change.entity in ("agent", "context") and change.id == self._agent_id)

    # -- lookups beyond the rows --------------------------------------------------------------
    def compaction(self, compaction_id: str | None) -> rm.Compaction | None:
        comps = self._snapshot.compactions if self._snapshot else ()
        return next((c for c in comps if c.id == compaction_id), None)

    def live_item_ids(self) -> list[str]:
        """Uncovered items in context order: the sequence the store's 'consecutive' rule uses."""
        items = self._snapshot.items if self._snapshot else ()
        return [i.id for i in items if i.compaction_id is None]

    # -- commands: through the runner; the cache changes only when the reload arrives --------
    def cannot(self, capability: Capability) -> str | None:
        """Why the source refuses this command (for a disabled control's tooltip), or None if it can."""
        source = self._services.source
        if self._agent_id is not None and self._agent_id.startswith(IMPORTED_AGENT_PREFIX):
            return ("This agent was imported from OpenTelemetry: its context is what the model was sent, "
                    "shown read-only.")
        if capability in source.capabilities:
            return None
        return source.why_not(capability) or "This source does not support that."

    def set_group_visible(self, group_id: str, visible: bool, on_done: OnDone | None = None,
                          on_error: OnError | None = None) -> bool:
        row = self.group(group_id)
        if row is None:
            return False
        revision, actor = row.group.revision, self._services.actor
        self._submit(Capability.SET_VISIBILITY,
                     lambda w: w.set_group_visibility(group_id, visible, revision, actor), on_done, on_error)
        return True

    def set_item_locked(self, item_id: str, locked: bool, on_done: OnDone | None = None,
                        on_error: OnError | None = None) -> bool:
        item = self.item(item_id)
        if item is None:
            return False
        revision, actor = item.revision, self._services.actor
        self._submit(Capability.LOCK, lambda w: w.set_item_locked(item_id, locked, revision, actor),
                     on_done, on_error)
        return True

    def edit_item(self, item_id: str, content: str, expected_revision: int, on_done: OnDone | None = None,
                  on_error: OnError | None = None) -> None:
        actor = self._services.actor
        self._submit(Capability.EDIT_ITEM, lambda w: w.edit_item(item_id, content, expected_revision, actor),
                     on_done, on_error)

    def compact(self, item_ids: Sequence[str], summary: str, focus: str, expected_context_revision: int,
                on_done: OnDone | None = None, on_error: OnError | None = None) -> None:
        assert self._agent_id is not None
        agent_id, ids, actor = self._agent_id, list(item_ids), self._services.actor
        self._submit(Capability.COMPACT,
                     lambda w: w.compact(agent_id, ids, summary, focus, expected_context_revision, actor),
                     on_done, on_error)

    def undo_compaction(self, compaction_id: str, on_done: OnDone | None = None,
                        on_error: OnError | None = None) -> None:
        actor = self._services.actor
        self._submit(Capability.UNDO_COMPACTION, lambda w: w.undo_compaction(compaction_id, actor),
                     on_done, on_error)

    def _submit(self, capability: Capability, command: Callable[[ContextWriter], Any],
                on_done: OnDone | None, on_error: OnError | None) -> None:
        """Run `command` on the source's context writer in the pool; a source without one fails it there."""
        self._edit(capability, command, on_done, on_error)

    @asyncSlot()
    async def _edit(self, capability: Capability, command: Callable[[ContextWriter], Any],
                    on_done: OnDone | None, on_error: OnError | None) -> None:
        """The edit's store call, awaited on the qasync loop; the context reloads whichever way it ends."""
        basis = self.context_revision
        try:
            result = await self._services.runner.run(run_command, self._services.source, capability, command)
        except asyncio.CancelledError:  # the window closed (the runner shut down): no reload, no report
            return
        except Exception as exc:  # a stale revision, a lock, a read-only source: reported, then reloaded
            self.schedule_reload()
            if on_error is not None:
                on_error(exc)
            else:
                self.command_failed.emit(exc, basis)
            return
        self.schedule_reload()
        if on_done is not None:
            on_done(result)

    # -- QAbstractItemModel: data and the two toggles ----------------------------------------------
    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        base = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if index.column() not in (VISIBLE, LOCKED):
            return base
        if self.toggle_refusal(index) is not None:  # a toggle that cannot be used looks disabled
            has_box = self.data(index, Qt.ItemDataRole.CheckStateRole) is not None
            return Qt.ItemFlag.ItemIsSelectable if has_box else base
        return base | Qt.ItemFlag.ItemIsUserCheckable

    def toggle_refusal(self, index: Index) -> str | None:
        """Why the Visible/Locked toggle at `index` cannot be used, or None when it can."""
        return context_rules.toggle_refusal(self, self.row_value(index), index.column())

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        value = self.row_value(index)
        return None if value is None else self._display.data(value, index.column(), role, self._as_of)

    def setData(self, index: Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        checkable = self.flags(index) & Qt.ItemFlag.ItemIsUserCheckable
        row = self.row_value(index)
        if role != Qt.ItemDataRole.CheckStateRole or not checkable or row is None:
            return False
        return self.set_toggle(row, index.column(), Qt.CheckState(value) == Qt.CheckState.Checked)

    def set_toggle(self, row: Row, column: int, on: bool, on_error: OnError | None = None) -> bool:
        """Visible acts on the row's whole turn group, Locked on its item."""
        if column == VISIBLE:
            return self.set_group_visible(row.group_id, on, on_error=on_error)
        return isinstance(row, ItemRow) and self.set_item_locked(row.item.id, on, on_error=on_error)


def _aware(moment: datetime | None) -> datetime | None:
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment

