"""One agent's context window as a Qt tree model (see `context_tree` for its shape).

The cache only changes when a reload arrives: commands go to the store through
the runner, and the bus event (or the command's completion) reloads. A reload is
applied as exact remove/insert/dataChanged calls per parent, so selection and
expansion survive other writers' changes.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from PySide6.QtCore import (
    QAbstractItemModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QColor, QFont

from store import readmodel as rm
from store.bus import RESET, Change
from store.source import Capability

from .context_tree import GROUP_LABELS, KIND_LABELS, GroupRow, ItemRow, Node, build_tree, tooltip_text
from .runner import Latest, OnDone, OnError
from .services import Services

Index = QModelIndex | QPersistentModelIndex

KIND, ROLE, PREVIEW, TOKENS, VISIBLE, LOCKED = range(6)
HEADERS = ("Item", "Role", "Content", "Tokens", "Visible", "Locked")

ItemIdRole = Qt.ItemDataRole.UserRole + 1
"""The item id (item rows) or group id (group rows)."""
NodeTypeRole = Qt.ItemDataRole.UserRole + 2
"""'group' or 'item'."""
AddedAfterRole = Qt.ItemDataRole.UserRole + 3
CoveredRole = Qt.ItemDataRole.UserRole + 4

KIND_COLOURS = {"message": "#5b8def", "tool_calls": "#e0a030", "result": "#2fa38b", "compaction": "#8e6bd8"}
MUTED = QColor("#8b949e")
ADDED_AFTER = QColor(240, 160, 32, 70)
NO_PARENT = QModelIndex()
RELOAD_DEBOUNCE_MS = 40


class ContextModel(QAbstractItemModel):
    reloaded = Signal()
    """A snapshot was applied (also after the first load of an agent)."""
    command_failed = Signal(object, int)
    """A command without its own `on_error` failed: the exception and the context revision it started from."""
    load_failed = Signal(str)

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._latest = Latest(services.runner)
        self._root = Node(("root", ""), None)
        self._by_key: dict[tuple[str, str], Node] = {}
        self._snapshot: rm.AgentContext | None = None
        self._agent_id: str | None = None
        self._as_of: datetime | None = None
        self._bold = QFont()
        self._bold.setBold(True)
        self._italic = QFont()
        self._italic.setItalic(True)
        self._timer = QTimer(self, singleShot=True, interval=RELOAD_DEBOUNCE_MS)
        self._timer.timeout.connect(self.reload)
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
    def snapshot(self) -> rm.AgentContext | None:
        return self._snapshot

    @property
    def as_of(self) -> datetime | None:
        return self._as_of

    def set_agent(self, agent_id: str | None, as_of: datetime | None = None) -> None:
        self._latest.cancel()
        self._timer.stop()
        self.beginResetModel()
        self._agent_id, self._snapshot, self._as_of = agent_id, None, _aware(as_of)
        self._root, self._by_key = Node(("root", ""), None), {}
        self.endResetModel()
        if agent_id is not None:
            self.reload()

    def schedule_reload(self) -> None:
        if self._agent_id is not None:
            self._timer.start()

    def reload(self) -> None:
        if self._agent_id is None or self._closed:
            return
        self._latest.submit(self._services.source.context, self._agent_id, on_done=self._apply,
                            on_error=lambda exc: self.load_failed.emit(str(exc)))

    def _on_changes(self, changes: Sequence[Change]) -> None:
        if self._agent_id is not None and any(self._concerns(c) for c in changes):
            self.schedule_reload()

    def _concerns(self, change: Change) -> bool:
        return change.op == RESET or change.parent("agent") == self._agent_id or (
            change.entity in ("agent", "context") and change.id == self._agent_id)

    # -- lookups for views (plain values, never indexes kept) ------------------------------
    def item(self, item_id: str) -> rm.ContextItem | None:
        node = self._by_key.get(("item", item_id))
        return node.value.item if node is not None and isinstance(node.value, ItemRow) else None

    def row_value(self, index: Index) -> ItemRow | GroupRow | None:
        return self._node(index).value if index.isValid() else None

    def group(self, group_id: str) -> GroupRow | None:
        node = self._by_key.get(("group", group_id))
        return node.value if node is not None and isinstance(node.value, GroupRow) else None

    def compaction(self, compaction_id: str | None) -> rm.Compaction | None:
        comps = self._snapshot.compactions if self._snapshot else ()
        return next((c for c in comps if c.id == compaction_id), None)

    def index_of(self, kind: str, node_id: str, column: int = 0) -> QModelIndex:
        node = self._by_key.get((kind, node_id))
        return self.createIndex(node.row, column, node) if node is not None else QModelIndex()

    def live_item_ids(self) -> list[str]:
        """Uncovered items in context order: the sequence the store's 'consecutive' rule uses."""
        items = self._snapshot.items if self._snapshot else ()
        return [i.id for i in items if i.compaction_id is None]

    def group_item_ids(self, group_id: str) -> list[str]:
        node = self._by_key.get(("group", group_id))
        return [c.key[1] for c in node.children] if node is not None else []

    # -- commands: through the runner; the cache changes only when the reload arrives --------
    def cannot(self, capability: Capability) -> str | None:
        """Why the source refuses this command (for a disabled control's tooltip), or None if it can."""
        source = self._services.source
        if capability in source.capabilities:
            return None
        why = getattr(source, "why_not", None)
        return (why(capability) if why else "") or "This source does not support that."

    def set_group_visible(self, group_id: str, visible: bool, on_done: OnDone | None = None,
                          on_error: OnError | None = None) -> bool:
        row = self.group(group_id)
        if row is None:
            return False
        self._submit(self._services.source.set_group_visibility, group_id, visible, row.group.revision,
                     self._services.actor, on_done=on_done, on_error=on_error)
        return True

    def set_item_locked(self, item_id: str, locked: bool, on_done: OnDone | None = None,
                        on_error: OnError | None = None) -> bool:
        item = self.item(item_id)
        if item is None:
            return False
        self._submit(self._services.source.set_item_locked, item_id, locked, item.revision,
                     self._services.actor, on_done=on_done, on_error=on_error)
        return True

    def edit_item(self, item_id: str, content: str, expected_revision: int, on_done: OnDone | None = None,
                  on_error: OnError | None = None) -> None:
        self._submit(self._services.source.edit_item, item_id, content, expected_revision,
                     self._services.actor, on_done=on_done, on_error=on_error)

    def compact(self, item_ids: Sequence[str], summary: str, focus: str, expected_context_revision: int,
                on_done: OnDone | None = None, on_error: OnError | None = None) -> None:
        assert self._agent_id is not None
        self._submit(self._services.source.compact, self._agent_id, list(item_ids), summary, focus,
                     expected_context_revision, self._services.actor, on_done=on_done, on_error=on_error)

    def undo_compaction(self, compaction_id: str, on_done: OnDone | None = None,
                        on_error: OnError | None = None) -> None:
        self._submit(self._services.source.undo_compaction, compaction_id, self._services.actor,
                     on_done=on_done, on_error=on_error)

    def _submit(self, fn: Callable[..., Any], *args: Any, on_done: OnDone | None,
                on_error: OnError | None) -> None:
        def done(result: Any) -> None:
            self.schedule_reload()
            if on_done is not None:
                on_done(result)

        basis = self._snapshot.context_revision if self._snapshot else 0

        def failed(exc: BaseException) -> None:
            self.schedule_reload()
            if on_error is not None:
                on_error(exc)
            else:
                self.command_failed.emit(exc, basis)

        self._services.runner.submit(fn, *args, on_done=done, on_error=failed)

    # -- applying a snapshot as exact row operations ---------------------------------------
    def _apply(self, ctx: rm.AgentContext) -> None:
        if ctx.agent_id != self._agent_id:
            return
        self._snapshot = ctx
        self._sync(self._root, QModelIndex(), build_tree(ctx, self._as_of).children)
        self._by_key = {}
        self._index_keys(self._root)
        self.reloaded.emit()

    def _index_keys(self, node: Node) -> None:
        for child in node.children:
            self._by_key[child.key] = child
            self._index_keys(child)

    def _sync(self, parent: Node, parent_index: QModelIndex, fresh: list[Node]) -> None:
        wanted = {n.key: n for n in fresh}
        order = {n.key: i for i, n in enumerate(fresh)}
        self._remove_stale(parent, parent_index, order)
        self._insert_missing(parent, parent_index, fresh)
        for node in parent.children:
            new = wanted[node.key]
            if new is node:
                continue
            if node.value != new.value:
                node.value = new.value
                self.dataChanged.emit(self.createIndex(node.row, 0, node),
                                      self.createIndex(node.row, len(HEADERS) - 1, node))
            self._sync(node, self.createIndex(node.row, 0, node), new.children)

    def _remove_stale(self, parent: Node, parent_index: QModelIndex,
                      order: dict[tuple[str, str], int]) -> None:
        last, doomed = -1, []
        for node in parent.children:  # survivors must keep their relative order; others go
            pos = order.get(node.key, -1)
            if pos > last:
                last = pos
            else:
                doomed.append(node.row)
        for first, end in reversed(_runs(doomed)):
            self.beginRemoveRows(parent_index, first, end)
            del parent.children[first:end + 1]
            parent.renumber()
            self.endRemoveRows()

    def _insert_missing(self, parent: Node, parent_index: QModelIndex, fresh: list[Node]) -> None:
        have = {n.key for n in parent.children}
        missing = [i for i, n in enumerate(fresh) if n.key not in have]
        for first, end in _runs(missing):
            self.beginInsertRows(parent_index, first, end)
            for node in fresh[first:end + 1]:
                node.parent = parent
            parent.children[first:first] = fresh[first:end + 1]
            parent.renumber()
            self.endInsertRows()

    # -- QAbstractItemModel ----------------------------------------------------------------
    def _node(self, index: Index) -> Node:
        return index.internalPointer() if index.isValid() else self._root  # type: ignore[return-value]

    def index(self, row: int, column: int, parent: Index = NO_PARENT) -> QModelIndex:
        node = self._node(parent)
        if parent.isValid() and parent.column() != 0:
            return QModelIndex()
        if 0 <= row < len(node.children) and 0 <= column < len(HEADERS):
            return self.createIndex(row, column, node.children[row])
        return QModelIndex()

    def parent(self, index: Index = NO_PARENT) -> QModelIndex:  # type: ignore[override]
        if not index.isValid():
            return QModelIndex()
        up = self._node(index).parent
        if up is None or up is self._root:
            return QModelIndex()
        return self.createIndex(up.row, 0, up)

    def rowCount(self, parent: Index = NO_PARENT) -> int:
        if parent.isValid() and parent.column() != 0:
            return 0
        return len(self._node(parent).children)

    def columnCount(self, parent: Index = NO_PARENT) -> int:
        return len(HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and 0 <= section < len(HEADERS):
            if role == Qt.ItemDataRole.DisplayRole:
                return HEADERS[section]
            if role == Qt.ItemDataRole.TextAlignmentRole and section == TOKENS:
                return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        base = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        column = index.column()
        if column not in (VISIBLE, LOCKED):
            return base
        if self.toggle_refusal(index) is not None:  # a toggle that cannot be used looks disabled
            has_box = self.data(index, Qt.ItemDataRole.CheckStateRole) is not None
            return Qt.ItemFlag.ItemIsSelectable if has_box else base
        return base | Qt.ItemFlag.ItemIsUserCheckable

    def toggle_refusal(self, index: Index) -> str | None:
        """Why the Visible/Locked toggle at `index` cannot be used, or None when it can."""
        value = self.row_value(index)
        if index.column() == VISIBLE:
            group = self.group(value.item.group_id) if isinstance(value, ItemRow) else value
            if isinstance(value, ItemRow) and value.covered:
                return "Replaced by the compaction summary above; undo the compaction to bring it back."
            return self.cannot(Capability.SET_VISIBILITY) or _visibility_refusal(group)
        if index.column() == LOCKED:
            if not isinstance(value, ItemRow) or value.covered:
                return "Only items in the context can be locked."
            return self.cannot(Capability.LOCK)
        return "Not a toggle."

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        value = self._node(index).value
        if isinstance(value, ItemRow):
            return self._item_data(value, index.column(), role)
        if isinstance(value, GroupRow):
            return self._group_data(value, index.column(), role)
        return None

    def setData(self, index: Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        checkable = self.flags(index) & Qt.ItemFlag.ItemIsUserCheckable
        if role != Qt.ItemDataRole.CheckStateRole or not checkable:
            return False
        checked = Qt.CheckState(value) == Qt.CheckState.Checked
        row = self.row_value(index)
        if index.column() == VISIBLE:
            group_id = row.item.group_id if isinstance(row, ItemRow) else row.group.id  # type: ignore[union-attr]
            return self.set_group_visible(group_id, checked)
        return isinstance(row, ItemRow) and self.set_item_locked(row.item.id, checked)

    # -- data by role -----------------------------------------------------------------------
    def _item_data(self, row: ItemRow, column: int, role: int) -> Any:
        item = row.item
        if role == Qt.ItemDataRole.DisplayRole:
            return self._item_text(row, column)
        if role == Qt.ItemDataRole.CheckStateRole and not row.covered:
            if column == VISIBLE:
                return Qt.CheckState.Checked if item.visible else Qt.CheckState.Unchecked
            if column == LOCKED:
                return Qt.CheckState.Checked if item.locked else Qt.CheckState.Unchecked
        if role == Qt.ItemDataRole.DecorationRole and column == KIND:
            return QColor(KIND_COLOURS.get(item.kind, "#9aa5b1"))
        if role == Qt.ItemDataRole.ForegroundRole and (row.covered or not item.visible):
            return MUTED
        if role == Qt.ItemDataRole.FontRole and row.covered:
            return self._italic
        return self._common(row, item.id, column, role)

    def _item_text(self, row: ItemRow, column: int) -> str | None:
        item = row.item
        if column == KIND:
            label = KIND_LABELS.get(item.kind, item.kind)
            label = f"{label} of {row.replaces}" if row.replaces else label
            return f"{label} · later" if row.added_after else label
        if column == ROLE:
            return item.role or ""
        if column == PREVIEW:
            return f"replaced: {row.preview}" if row.covered else row.preview
        if column == TOKENS:
            return f"{item.token_estimate:,}"
        return None

    def _group_data(self, row: GroupRow, column: int, role: int) -> Any:
        if role == Qt.ItemDataRole.DisplayRole:
            return self._group_text(row, column)
        if role == Qt.ItemDataRole.CheckStateRole and column == VISIBLE:
            return row.visible
        if role == Qt.ItemDataRole.FontRole and column == KIND:
            return self._bold
        if role == Qt.ItemDataRole.ForegroundRole and row.visible == Qt.CheckState.Unchecked:
            return MUTED
        return self._common(row, row.group.id, column, role)

    def _group_text(self, row: GroupRow, column: int) -> str | None:
        group = row.group
        if column == KIND:
            label = GROUP_LABELS.get(group.kind, group.kind.capitalize())
            return "Compaction" if group.kind == "compaction" else f"{label} {group.ordinal}"
        if column == PREVIEW:
            count = f"{row.items} item{'s' if row.items != 1 else ''}"
            return count if row.visible != Qt.CheckState.Unchecked else f"{count} · hidden from the model"
        if column == TOKENS:
            return f"{row.tokens:,}"
        return None

    def _common(self, row: ItemRow | GroupRow, node_id: str, column: int, role: int) -> Any:
        if role == ItemIdRole:
            return node_id
        if role == NodeTypeRole:
            return "item" if isinstance(row, ItemRow) else "group"
        if role == AddedAfterRole:
            return row.added_after
        if role == CoveredRole:
            return isinstance(row, ItemRow) and row.covered
        if role == Qt.ItemDataRole.BackgroundRole and row.added_after:
            return ADDED_AFTER
        if role == Qt.ItemDataRole.TextAlignmentRole and column == TOKENS:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(row, column)
        return None

    def _tooltip(self, row: ItemRow | GroupRow, column: int) -> str | None:
        if column in (VISIBLE, LOCKED):
            index = self.index_of("item" if isinstance(row, ItemRow) else "group",
                                  row.item.id if isinstance(row, ItemRow) else row.group.id, column)
            why = self.toggle_refusal(index)
            hint = ("Shows or hides the whole turn group (Space)" if column == VISIBLE
                    else "A locked item cannot be edited, hidden or compacted (L)")
            return html.escape(why or hint)
        notes = []
        if isinstance(row, ItemRow) and row.covered:
            notes.append("Replaced by the compaction summary above; the model does not see it.")
        if row.added_after and self._as_of is not None:
            notes.append(f"Added after {self._as_of.astimezone():%Y-%m-%d %H:%M:%S}.")
        body = tooltip_text(row.item.content) if isinstance(row, ItemRow) and column == PREVIEW else ""
        return ("".join(f"<p>{html.escape(n)}</p>" for n in notes) + body) or None


def _visibility_refusal(group: GroupRow | None) -> str | None:
    if group is None:
        return "This item's turn group is not loaded."
    if group.has_covered:
        return "Part of this turn group is inside a compaction; undo the compaction to change its visibility."
    if group.visible == Qt.CheckState.Checked and group.has_locked:
        return "This turn group holds a locked item; unlock it before hiding the group."
    return None


def _runs(rows: list[int]) -> list[tuple[int, int]]:
    """Sorted row numbers as inclusive (first, last) runs."""
    runs: list[tuple[int, int]] = []
    for row in rows:
        if runs and runs[-1][1] == row - 1:
            runs[-1] = (runs[-1][0], row)
        else:
            runs.append((row, row))
    return runs


def _aware(moment: datetime | None) -> datetime | None:
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment
