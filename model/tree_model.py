"""The project tree as a Qt item model: projects > tasks > sessions > agents (> sub-agents) > runs.

Children load lazily: `fetchMore` only starts a read on the runner and the rows
are inserted when the answer arrives. Runs are paged newest first, so an agent
with 100,000 runs opens at once. Bus changes become exact inserts, removals and
per-row `dataChanged`; the rows a change batch touches are re-read in one call
on the runner. Reads complete out of order on the pool, so every read carries
the sequence number it was issued with and a row ignores answers older than the
one it already shows. Events about children of a node whose load is in flight
wait on that node and are replayed after the load (the load may predate them).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QObject, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QIcon

from store import readmodel as rm
from store.bus import RESET, Change
from store.source import Page

from .services import Services
from .tree_rows import LEVELS, Key, RowFields, entity_of, parents_of, plural, read_rows, row_fields

Index = QModelIndex | QPersistentModelIndex
TOP = QModelIndex()
"""The invalid index (the top level), as a shared default argument."""

EntityRole = Qt.ItemDataRole.UserRole + 1
"""(entity, id) of the row."""
StatusRole = Qt.ItemDataRole.UserRole + 2
PendingRole = Qt.ItemDataRole.UserRole + 3
"""Pending approvals at or below this row, as an int."""

NAME, STATUS, PENDING, INFO = range(4)
HEADERS = ("Name", "Status", "Pending", "Info")
DEFAULT_PAGE_SIZE = 200


class _Node:
    __slots__ = ("children", "deferred", "entity", "f", "id", "loaded", "loading", "n_sub", "parent", "seq",
                 "total", "uid")

    def __init__(self, uid: int, entity: str, node_id: str, parent: _Node | None,
                 f: RowFields | None) -> None:
        self.uid, self.entity, self.id, self.parent = uid, entity, node_id, parent
        self.f = f or RowFields("", "", 0, "", "", 0.0, "")
        self.children: list[_Node] = []
        self.n_sub = 0
        """Sub-agents come first among an agent's children, runs after them."""
        self.total = self.f.total
        self.loaded = self.loading = False
        self.deferred: list[Change] = []
        self.seq = -1

    @property
    def runs_loaded(self) -> int:
        return len(self.children) - self.n_sub

    def child_row(self, child: _Node) -> int:
        return self.children.index(child)


class ProjectTreeModel(QAbstractItemModel):
    children_loaded = Signal(str, str)
    """A node's children (or one more page of runs) arrived: (entity, id); ("", "") for the top level."""
    load_failed = Signal(str)

    def __init__(self, services: Services, parent: QObject | None = None, *,
                 page_size: int = DEFAULT_PAGE_SIZE,
                 status_icon: Callable[[str], QIcon] | None = None) -> None:
        super().__init__(parent)
        self._source = services.source
        self._runner = services.runner
        self._page_size = page_size
        self._status_icon = status_icon
        self._uids = itertools.count(1)
        self._seqs = itertools.count(1)
        self._generation = 0
        self._by_uid: dict[int, _Node] = {}
        self._by_key: dict[Key, _Node] = {}
        self._root = _Node(0, "", "", None, None)
        services.bridge.changes.connect(self._on_changes)
        self.fetchMore(QModelIndex())

    # -- structure ------------------------------------------------------------------------
    def _node(self, index: Index) -> _Node | None:
        if not index.isValid():
            return self._root
        return self._by_uid.get(index.internalId())

    def _index_of(self, node: _Node, column: int = 0) -> QModelIndex:
        if node.parent is None:
            return QModelIndex()
        return self.createIndex(node.parent.child_row(node), column, node.uid)

    def index(self, row: int, column: int, parent: Index = TOP) -> QModelIndex:
        node = self._node(parent)
        if node is None or not 0 <= row < len(node.children) or not 0 <= column < len(HEADERS):
            return QModelIndex()
        return self.createIndex(row, column, node.children[row].uid)

    def parent(self, child: Index = TOP) -> QModelIndex:  # type: ignore[override]
        node = self._node(child) if child.isValid() else None
        if node is None or node.parent is None or node.parent is self._root:
            return QModelIndex()
        return self._index_of(node.parent)

    def rowCount(self, parent: Index = TOP) -> int:
        if parent.isValid() and parent.column() != 0:
            return 0
        node = self._node(parent)
        return len(node.children) if node is not None else 0

    def columnCount(self, parent: Index = TOP) -> int:
        return len(HEADERS)

    def hasChildren(self, parent: Index = TOP) -> bool:
        node = self._node(parent)
        if node is None or node.entity == "run" or (parent.isValid() and parent.column() != 0):
            return False
        if node.children or node.loading:
            return True
        if node.loaded:
            return node.entity == "agent" and node.runs_loaded < (node.total or 0)
        return node.total is None or node.total > 0

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole \
                and 0 <= section < len(HEADERS):
            return HEADERS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        node = self._node(index) if index.isValid() else None
        if node is None:
            return None
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(node, column)
        if role == Qt.ItemDataRole.DecorationRole and column == NAME and self._status_icon is not None:
            return self._status_icon(node.f.status)
        if role == Qt.ItemDataRole.ToolTipRole:
            return node.f.tooltip
        if role == EntityRole:
            return (node.entity, node.id)
        if role == StatusRole:
            return node.f.status
        if role == PendingRole:
            return node.f.pending
        if role == Qt.ItemDataRole.TextAlignmentRole and column == PENDING:
            return Qt.AlignmentFlag.AlignCenter
        return None

    def _display(self, node: _Node, column: int) -> str:
        if column == NAME:
            return node.f.name
        if column == STATUS:
            return node.f.status
        if column == PENDING:
            return str(node.f.pending) if node.f.pending else ""
        if node.entity == "agent" and node.total is not None:
            runs = plural(node.total, "run")
            if node.loaded and node.runs_loaded < node.total:
                runs = f"{node.runs_loaded:,} of {runs}"
            return f"{node.f.info} · {runs}"
        return node.f.info

    # -- public helpers for views ---------------------------------------------------------
    def find(self, entity: str, entity_id: str, column: int = 0) -> QModelIndex:
        node = self._by_key.get((entity, entity_id))
        return self._index_of(node, column) if node is not None else QModelIndex()

    def is_loading(self, index: Index) -> bool:
        node = self._node(index)
        return node is not None and node.loading

    def is_loaded(self, index: Index) -> bool:
        node = self._node(index)
        return node is not None and node.loaded

    def runs_shown(self, agent_id: str) -> tuple[int, int]:
        """(loaded, total) runs of an agent."""
        node = self._by_key.get(("agent", agent_id))
        return (0, 0) if node is None else (node.runs_loaded, node.total or 0)

    def loaded_keys(self) -> list[Key]:
        """Every loaded row, depth first (parents before children)."""
        out: list[Key] = []
        stack = list(reversed(self._root.children))
        while stack:
            node = stack.pop()
            out.append((node.entity, node.id))
            stack.extend(reversed(node.children))
        return out

    def fetch_more(self, index: Index, limit: int | None = None) -> bool:
        """Like `fetchMore`, with a larger page when a view pages through runs on purpose."""
        node = self._node(index)
        if node is None or not (self._can_fetch(node) or self._has_more(node)):
            return False
        self._load(node, limit or self._page_size)
        return True

    def has_more(self, index: Index) -> bool:
        """An agent whose older runs are not loaded yet (`fetchMore` loads the next page)."""
        node = self._node(index)
        return node is not None and self._has_more(node)

    def reload(self) -> None:
        """Start again from the store: only for a reset (feed gap), never for ordinary changes."""
        self.beginResetModel()
        self._generation += 1
        self._by_uid.clear()
        self._by_key.clear()
        self._root = _Node(0, "", "", None, None)
        self.endResetModel()
        self.fetchMore(QModelIndex())

    # -- lazy loading ---------------------------------------------------------------------
    def canFetchMore(self, parent: Index) -> bool:
        node = self._node(parent)
        return node is not None and (not parent.isValid() or parent.column() == 0) and self._can_fetch(node)

    def _can_fetch(self, node: _Node) -> bool:
        """Only the first load: QTreeView calls `fetchMore` on every relayout of an expanded row while
        this is true, which would page through all of an agent's runs on its own."""
        return node.entity != "run" and not node.loading and not node.loaded

    def _has_more(self, node: _Node) -> bool:
        more = node.runs_loaded < (node.total or 0)
        return node.entity == "agent" and node.loaded and not node.loading and more

    def fetchMore(self, parent: Index) -> None:
        """The first load of a row's children, or the next page of an agent's runs."""
        node = self._node(parent)
        if node is not None and (self._can_fetch(node) or self._has_more(node)):
            self._load(node, self._page_size)

    def _load(self, node: _Node, limit: int) -> None:
        node.loading = True
        generation, seq = self._generation, next(self._seqs)
        source = self._source
        readers: dict[str, Callable[..., Any]] = {
            "": source.projects, "project": source.tasks, "task": source.sessions, "session": source.agents,
            "agent": source.runs}
        read = readers[node.entity]
        args: tuple[Any, ...] = () if node is self._root else (node.id,)
        if node.entity == "agent":
            args = (node.id, node.runs_loaded, limit)
        self._submit(read, *args, on_done=lambda result: self._loaded(generation, seq, node, result),
                     on_error=lambda exc: self._load_error(generation, node, exc))

    def _submit(self, fn: Callable[..., Any], *args: Any, on_done: Callable[[Any], None],
                on_error: Callable[[BaseException], None]) -> None:
        self._runner.submit(fn, *args, on_done=on_done, on_error=on_error)

    def _alive(self, generation: int, node: _Node) -> bool:
        return generation == self._generation and (
            node is self._root or self._by_key.get((node.entity, node.id)) is node)

    def _load_error(self, generation: int, node: _Node, exc: BaseException) -> None:
        if self._alive(generation, node):
            node.loading = False
            self.load_failed.emit(f"Could not load {node.entity or 'projects'} {node.id}: {exc}".strip())

    def _loaded(self, generation: int, seq: int, node: _Node, result: Any) -> None:
        if not self._alive(generation, node):
            return
        node.loading, node.loaded = False, True
        if isinstance(result, Page):
            node.total = result.total
            values: Sequence[Any] = result.items
        else:
            values = result
        if node.entity == "session":
            self._attach_agents(node, values, seq)
        else:
            self._append(node, [v for v in values if not self._known(v, seq)], seq)
        if node.entity == "agent" and node.parent is not None:
            index = self._index_of(node, INFO)
            self.dataChanged.emit(index, index, [Qt.ItemDataRole.DisplayRole])
        self.children_loaded.emit(node.entity, node.id)
        deferred, node.deferred = node.deferred, []
        if deferred:
            self._on_changes(deferred)

    def _known(self, value: Any, seq: int) -> bool:
        node = self._by_key.get((entity_of(value), value.id))
        if node is not None:
            self._update(node, value, seq)
        return node is not None

    def _make(self, value: Any, parent: _Node | None, seq: int) -> _Node:
        node = _Node(next(self._uids), entity_of(value), value.id, parent, row_fields(value))
        node.seq = seq
        self._by_uid[node.uid] = node
        self._by_key[(node.entity, node.id)] = node
        return node

    def _append(self, parent: _Node, values: Sequence[Any], seq: int) -> None:
        if not values:
            return
        first = len(parent.children)
        self.beginInsertRows(self._index_of(parent), first, first + len(values) - 1)
        parent.children.extend(self._make(v, parent, seq) for v in values)
        self.endInsertRows()

    def _attach_agents(self, session: _Node, agents: Sequence[rm.Agent], seq: int) -> None:
        """Top-level agents become the session's rows; sub-agents nest under their parent agent."""
        made: dict[str, _Node] = {}
        tops: list[_Node] = []
        for agent in agents:
            if self._known(agent, seq):
                continue
            parent = made.get(agent.parent_agent_id or "")
            if parent is None and agent.parent_agent_id and ("agent", agent.parent_agent_id) in self._by_key:
                self._insert_value(agent, seq)  # the parent agent is already shown
                continue
            node = made[agent.id] = self._make(agent, parent or session, seq)
            if parent is not None:
                parent.children.insert(parent.n_sub, node)
                parent.n_sub += 1
            else:
                tops.append(node)
        if tops:
            first = len(session.children)
            self.beginInsertRows(self._index_of(session), first, first + len(tops) - 1)
            session.children.extend(tops)
            self.endInsertRows()

    # -- bus changes ----------------------------------------------------------------------
    def _on_changes(self, changes: Sequence[Change]) -> None:
        if any(c.op == RESET for c in changes):
            self.reload()
            return
        wanted: dict[Key, str] = {}
        for change in changes:
            self._plan(change, wanted)
        if wanted:
            generation, seq = self._generation, next(self._seqs)
            self._submit(read_rows, self._source, wanted,
                         on_done=lambda rows: self._apply(generation, seq, rows),
                         on_error=self._refresh_error)

    def _refresh_error(self, exc: BaseException) -> None:
        self.load_failed.emit(f"Could not refresh the tree: {exc}")

    def _plan(self, change: Change, wanted: dict[Key, str]) -> None:
        if change.entity == "approval":
            for level in LEVELS:
                if change.parents.get(level):
                    self._want(level, change.parents[level], change, wanted, subject=False)
            return
        if change.entity not in LEVELS:
            return
        if change.op == "delete":
            self._remove((change.entity, change.id))
        else:
            self._want(change.entity, change.id, change, wanted, subject=True)
        for level in LEVELS[:LEVELS.index(change.entity)]:  # roll-up statuses and counts above it
            if change.parents.get(level):
                self._want(level, change.parents[level], change, wanted, subject=False)

    def _want(self, entity: str, entity_id: str, change: Change, wanted: dict[Key, str],
              subject: bool) -> None:
        node = self._by_key.get((entity, entity_id))
        if node is not None:
            wanted[(entity, entity_id)] = node.f.group
            return
        lister = self._lister(entity, change.parents)
        if lister is None:
            return
        if lister.loading:
            lister.deferred.append(change)  # the load in flight may predate this change
        elif subject and lister.loaded:
            wanted[(entity, entity_id)] = lister.id

    def _lister(self, entity: str, parents: Mapping[str, str]) -> _Node | None:
        """The node whose load lists rows of this entity: a session lists all its agents, sub-agents too."""
        if entity == "project":
            return self._root
        level = LEVELS[LEVELS.index(entity) - 1]
        return self._by_key.get((level, parents.get(level, "")))

    def _apply(self, generation: int, seq: int, rows: list[tuple[Key, Any]]) -> None:
        if generation != self._generation:
            return
        for key, value in rows:
            node = self._by_key.get(key)
            if value is None:
                continue
            if node is not None:
                self._update(node, value, seq)
            else:
                self._insert_value(value, seq)

    def _update(self, node: _Node, value: Any, seq: int) -> None:
        if seq < node.seq:
            return
        node.seq = seq
        new, old = row_fields(value), node.f
        if new == old:
            return
        node.f = new
        columns = set()
        if new.name != old.name:
            columns.add(NAME)
        if new.status != old.status:
            columns |= {NAME, STATUS}
        if new.pending != old.pending:
            columns.add(PENDING)
        if new.info != old.info or new.total != old.total:
            columns.add(INFO)
        if new.total is not None:
            node.total = new.total
        if new.tooltip != old.tooltip:
            columns |= {NAME, INFO}
        if columns:
            self.dataChanged.emit(self._index_of(node, min(columns)), self._index_of(node, max(columns)))

    def _insert_value(self, value: Any, seq: int) -> None:
        entity = entity_of(value)
        lister = self._lister(entity, parents_of(value))
        if lister is None or not lister.loaded:
            return
        parent = lister
        if isinstance(value, rm.Agent) and value.parent_agent_id:
            parent_agent = self._by_key.get(("agent", value.parent_agent_id))  # maybe new in this batch
            if parent_agent is None:
                return
            parent = parent_agent
        node_fields = row_fields(value)
        row = self._position(parent, entity, node_fields, value.id)
        if row is None:
            return
        self.beginInsertRows(self._index_of(parent), row, row)
        parent.children.insert(row, self._make(value, parent, seq))
        if entity == "agent" and parent.entity == "agent":
            parent.n_sub += 1
        self.endInsertRows()

    def _position(self, parent: _Node, entity: str, f: RowFields, node_id: str) -> int | None:
        kids = parent.children
        if entity == "run":  # newest first, like the store's pages
            for row in range(parent.n_sub, len(kids)):
                other = kids[row].f
                if other.sort_key < f.sort_key or (other.sort_key == f.sort_key and kids[row].id > node_id):
                    return row
            return len(kids) if parent.runs_loaded + 1 >= (parent.total or 0) else None
        end = parent.n_sub if parent.entity == "agent" else len(kids)
        row = end
        while row > 0 and (kids[row - 1].f.sort_key, kids[row - 1].id) > (f.sort_key, node_id):
            row -= 1
        return row

    def _remove(self, key: Key) -> None:
        node = self._by_key.get(key)
        if node is None or node.parent is None:
            return
        parent = node.parent
        row = parent.child_row(node)
        self.beginRemoveRows(self._index_of(parent), row, row)
        del parent.children[row]
        if row < parent.n_sub:
            parent.n_sub -= 1
        self._forget(node)
        self.endRemoveRows()

    def _forget(self, node: _Node) -> None:
        for child in node.children:
            self._forget(child)
        self._by_uid.pop(node.uid, None)
        self._by_key.pop((node.entity, node.id), None)

