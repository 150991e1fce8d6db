"""The project tree dock: a filter row above a lazy tree of projects > tasks > sessions > agents > runs.

The view shows the model through a plain `QIdentityProxyModel`, and through the
filter proxy only while a filter is on. A QTreeView relayout (which every row
inserted under an expanded row triggers) asks its model about every loaded row;
through a QSortFilterProxyModel each of those costs several calls into Python,
about three times the work with thousands of runs loaded. Swapping keeps the
column widths, the current row and, when the filter is cleared, the expansion
the operator had before filtering. `proxy` is whichever of the two the view
shows, so `proxy.mapFromSource`/`mapToSource` translate between view and model.
`select_entity` reveals anything by id (`tree_reveal`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import cast

from PySide6.QtCore import (
    QAbstractProxyModel,
    QEvent,
    QIdentityProxyModel,
    QItemSelectionModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QPoint,
    Qt,
    Signal,
)
from PySide6.QtGui import QKeyEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QLabel, QMenu, QTreeView, QVBoxLayout, QWidget

from agentdesk.gui.tree.compare_menu import run_menu
from agentdesk.gui.tree.delegate import StatusIcons, TreeDelegate
from agentdesk.gui.tree.filter_bar import TreeFilterBar
from agentdesk.gui.tree.reveal import Revealer
from agentdesk.model.messages.sending import messaging_refusal
from agentdesk.model.plain import shown_line
from agentdesk.model.services import Services
from agentdesk.model.tree.filter import TreeFilterProxy
from agentdesk.model.tree.model import INFO, NAME, PENDING, STATUS, EntityRole, ProjectTreeModel

Index = QModelIndex | QPersistentModelIndex
COLUMN_PX = {STATUS: 96, PENDING: 64, INFO: 190}
NAME_ROOM_PX = 170
"""Names keep at least this much: the Status and Info columns give way before they do."""
EXPAND_BELOW_MAX = 500
"""Rows key * opens at most."""
REVEAL_PAGE = 2_000
REVEAL_MAX_RUNS = 20_000
"""Revealing a run pages through its agent's runs newest first; older runs than this are not searched."""


class ProjectTree(QWidget):
    run_selected = Signal(str)
    agent_selected = Signal(str)
    """An agent, or the agent of the selected run."""
    selection_changed = Signal(str, str)
    status_message = Signal(str)
    compare_requested = Signal(str, str)
    """(run A, run B or "" to pick B in the diff window): "Compare with…" in a run's context menu."""
    message_requested = Signal(str, str)
    """(agent id, agent name): "Send a message…" in an agent's or a run's context menu."""

    def __init__(self, services: Services, parent: QWidget | None = None, *,
                 page_size: int | None = None) -> None:
        super().__init__(parent)
        extra = {} if page_size is None else {"page_size": page_size}
        self.model = ProjectTreeModel(services, self, status_icon=StatusIcons(), **extra)
        self._messaging_refusal = messaging_refusal(services)
        self.plain_proxy = QIdentityProxyModel(self)
        self.plain_proxy.setSourceModel(self.model)
        self.filter_proxy = TreeFilterProxy(self)
        """Attached to the model only while filtering: it does work on every row inserted."""
        self._revealer = Revealer(services, self.model, expand=self._expand, select=self._select,
                                  message=self.show_message)
        self._to_expand: set[tuple[str, str]] = set()
        self._expanding_below: set[tuple[str, str]] = set()
        """Rows key * opened: their children open as they load."""
        self._expand_below_budget = 0
        self._unfiltered_expansion: list[str] = []
        self._quiet = False
        self._last_key: tuple[str, str] | None = None
        self._reset_state: tuple[list[str], tuple[str, str] | None] = ([], None)
        self._build()
        self._connect()

    @property
    def proxy(self) -> QAbstractProxyModel:
        """The proxy the view shows: the filter proxy while filtering, an identity proxy otherwise."""
        return cast(QAbstractProxyModel, self.view.model())

    # -- layout ---------------------------------------------------------------------------
    def _build(self) -> None:
        self.filter_bar = TreeFilterBar(self)
        self.filter_edit = self.filter_bar.filter_edit
        self.status_combo = self.filter_bar.status_combo
        self.pending_button = self.filter_bar.pending_button
        self.view = QTreeView(self)
        self.view.setModel(self.plain_proxy)
        self.view.setItemDelegate(TreeDelegate(self.view))
        self.view.setUniformRowHeights(True)
        self.view.setAllColumnsShowFocus(True)
        self.view.setAlternatingRowColors(True)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        header = self.view.header()
        # Names matter most: they take what the status, pending and info columns (each as wide as its
        # contents) leave; in a narrow dock Info gives way (its facts are in every row's tooltip), so no
        # column hides past the edge behind a scroll bar (`_fit_columns`).
        header.setStretchLastSection(False)
        header.setMinimumSectionSize(24)
        header.setSectionResizeMode(NAME, QHeaderView.ResizeMode.Stretch)
        for column, width in COLUMN_PX.items():  # fixed: rows loading later never squeeze the names
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Interactive)
            header.resizeSection(column, width)
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.view.viewport().installEventFilter(self)
        self.view.installEventFilter(self)
        self.message = QLabel(self)
        self.message.setTextFormat(Qt.TextFormat.PlainText)
        self.message.setWordWrap(True)
        self.message.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.filter_bar)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.message)
        self.setFocusProxy(self.view)

    def _connect(self) -> None:
        self.filter_bar.changed.connect(lambda: self._refilter(lambda: self.filter_bar.apply_to(self.filter_proxy)))
        self.filter_bar.left.connect(self.view.setFocus)
        find = QShortcut(QKeySequence.StandardKey.Find, self,
                         context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
        find.setWhatsThis("Tree: Filter the tree by name")
        find.activated.connect(self.filter_bar.focus)
        self.view.selectionModel().currentChanged.connect(self._on_current)
        self.view.verticalScrollBar().valueChanged.connect(self._fetch_visible_tail)
        self.view.customContextMenuRequested.connect(self._context_menu)
        self.model.children_loaded.connect(self._on_children_loaded)
        self.model.modelAboutToBeReset.connect(self._before_reset)
        self.model.modelReset.connect(self._after_reset)
        self.model.load_failed.connect(self.show_message)

    def show_message(self, text: str) -> None:
        self.message.setText(shown_line(text, 600))
        self.message.setVisible(bool(text))
        if text:
            self.status_message.emit(text)

    # -- selection ------------------------------------------------------------------------
    def _source(self, view_index: Index) -> QModelIndex:
        return self.proxy.mapToSource(view_index) if view_index.isValid() else QModelIndex()

    def current_selection(self) -> tuple[str, str] | None:
        index = self._source(self.view.currentIndex())
        key = index.data(EntityRole) if index.isValid() else None
        return (str(key[0]), str(key[1])) if key else None

    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        index = self._source(current)
        if not index.isValid() or self._quiet:
            return
        entity, entity_id = index.data(EntityRole)
        self._last_key = (entity, entity_id)
        self.selection_changed.emit(entity, entity_id)
        if entity == "run":
            agent = index.parent()
            self.run_selected.emit(entity_id)
            self.agent_selected.emit(agent.data(EntityRole)[1])
            if index.row() >= self.model.rowCount(agent) - 3:
                self.model.fetchMore(agent)
        elif entity == "agent":
            self.agent_selected.emit(entity_id)

    def context_menu_for(self, view_index: QModelIndex) -> QMenu | None:
        """The context menu of an agent or a run row: built from loaded rows, never a store read."""
        index = self._source(view_index)
        entity = index.data(EntityRole)[0] if index.isValid() else None
        if entity == "agent":
            menu = QMenu(self)
            agent = index.siblingAtColumn(NAME)
        elif entity == "run":
            menu = run_menu(index.siblingAtColumn(NAME), self.compare_requested.emit, self)
            menu.addSeparator()
            agent = index.parent().siblingAtColumn(NAME)
        else:
            return None
        self._message_action(menu, str(agent.data(EntityRole)[1]), str(agent.data() or ""))
        return menu

    def _message_action(self, menu: QMenu, agent_id: str, name: str) -> None:
        action = menu.addAction(f"Send a message to {shown_line(name or agent_id, 60)}…")
        action.setEnabled(self._messaging_refusal is None)
        action.setToolTip(self._messaging_refusal or "Queued for the agent's next model call; cancellable until then")
        action.triggered.connect(lambda _=False: self.message_requested.emit(agent_id, name or agent_id))
        menu.setToolTipsVisible(True)

    def _context_menu(self, position: QPoint) -> None:
        menu = self.context_menu_for(self.view.indexAt(position))
        if menu is not None:
            menu.exec(self.view.viewport().mapToGlobal(position))
            menu.deleteLater()

    def _fetch_visible_tail(self) -> None:
        """Scrolling to the last loaded run of an agent loads its next page."""
        viewport = self.view.viewport()
        index = self._source(self.view.indexAt(QPoint(4, viewport.height() - 4)))
        if index.isValid() and index.data(EntityRole)[0] == "run":
            self.model.fetchMore(index.parent())

    def _select(self, source_index: QModelIndex) -> None:
        index = self.proxy.mapFromSource(source_index)
        if not index.isValid():  # hidden by the filter: the operator asked for this row explicitly
            self.clear_filters()
            index = self.proxy.mapFromSource(source_index)
        self.view.selectionModel().setCurrentIndex(
            index, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
        self.view.scrollTo(index, QAbstractItemView.ScrollHint.PositionAtCenter)

    def _reselect(self, key: tuple[str, str] | None) -> None:
        """The same row current again after the view's rows changed under it: nobody needs to hear about it."""
        if key is None or self.view.currentIndex().isValid():
            return
        index = self.proxy.mapFromSource(self.model.find(*key))
        if index.isValid():
            self._quiet = True
            self.view.setCurrentIndex(index)
            self._quiet = False
            self.view.scrollTo(index)

    # -- filtering ------------------------------------------------------------------------
    def clear_filters(self) -> None:
        self.filter_bar.clear()
        self._refilter(self.filter_proxy.clear)

    def _refilter(self, change: Callable[[], object]) -> None:
        """Apply a filter change; show the matches expanded, and give the old view back when cleared."""
        current = self.current_selection() or self._last_key
        was_filtering = self.filter_proxy.active
        if not was_filtering:
            self._unfiltered_expansion = self.expanded_ids()
        change()
        filtering = self.filter_proxy.active
        if filtering != was_filtering:
            self._swap(filtering)
        if filtering:
            self._expand_matches()
        else:
            self.restore_expanded(self._unfiltered_expansion)
        self._reselect(current)

    def _swap(self, filtering: bool) -> None:
        """The filter proxy does work for every row the model inserts: attach it only while it is shown."""
        if filtering:
            self.filter_proxy.setSourceModel(self.model)
            self._show(self.filter_proxy)
        else:
            self._show(self.plain_proxy)
            self.filter_proxy.setSourceModel(None)  # type: ignore[arg-type]  # nullptr: detached

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.view.viewport() and event.type() == QEvent.Type.Resize:
            self._fit_columns()
        if watched is self.view and event.type() == QEvent.Type.KeyPress \
                and isinstance(event, QKeyEvent) and event.key() == Qt.Key.Key_Asterisk:
            self.expand_below(self.proxy.mapToSource(self.view.currentIndex()))
            return True
        return super().eventFilter(watched, event)

    def expand_below(self, source_index: QModelIndex) -> None:
        """Key *: everything under a row, however deep, as its levels load (Qt's own * opens only what is
        loaded already: one level a press here). At most EXPAND_BELOW_MAX rows, so a big project stays
        usable."""
        if not source_index.isValid():
            return
        self._expand_below_budget = EXPAND_BELOW_MAX
        self._expanding_below.clear()
        self._expand_subtree(source_index)

    def _expand_subtree(self, source_index: QModelIndex) -> None:
        key = source_index.data(EntityRole)
        if not isinstance(key, tuple) or self._expand_below_budget <= 0 or not self.model.hasChildren(source_index):
            return
        self._expand_below_budget -= 1
        self._expanding_below.add(key)
        self._expand(source_index)
        for row in range(self.model.rowCount(source_index)):
            self._expand_subtree(self.model.index(row, 0, source_index))

    def _fit_columns(self) -> None:
        """Names keep at least NAME_ROOM_PX: in a narrow dock Info gives way first, then Status (the
        name's icon shows the status too); both are in every row's tooltip."""
        header = self.view.header()
        room = self.view.viewport().width() - header.sectionSize(PENDING)
        for column in (STATUS, INFO):
            wanted = COLUMN_PX[column]  # not sectionSize: a hidden section measures 0
            fits = room - wanted >= NAME_ROOM_PX
            header.setSectionHidden(column, not fits)
            room -= wanted if fits else 0

    def _show(self, proxy: QAbstractProxyModel) -> None:
        """Point the view at another proxy. `setModel` resets the header and makes a new selection
        model: keep the column widths, and listen to the new selection model only."""
        old = self.view.selectionModel()
        header = self.view.header().saveState()
        self.view.setModel(proxy)
        self.view.header().restoreState(header)
        old.currentChanged.disconnect(self._on_current)
        old.deleteLater()
        self.view.selectionModel().currentChanged.connect(self._on_current)

    def _expand_matches(self) -> None:
        stack = [QModelIndex()]
        while stack:
            parent = stack.pop()
            for row in range(self.proxy.rowCount(parent)):
                index = self.proxy.index(row, 0, parent)
                if self.proxy.rowCount(index):
                    self.view.expand(index)
                    stack.append(index)

    # -- revealing and expanding ------------------------------------------------------------
    def select_entity(self, entity: str, entity_id: str) -> None:
        """Expand down to a project/task/session/agent/run (or a span's or approval's run) and select it."""
        self._revealer.start(entity, entity_id, page=REVEAL_PAGE, max_runs=REVEAL_MAX_RUNS)

    def _expand(self, source_index: QModelIndex) -> None:
        if self.model.canFetchMore(source_index) and not self.model.is_loaded(source_index):
            self.model.fetchMore(source_index)
        index = self.proxy.mapFromSource(source_index)
        if index.isValid():
            self.view.expand(index)

    def _on_children_loaded(self, entity: str, entity_id: str) -> None:
        self._revealer.step()
        self._expand_pending()
        if (entity, entity_id) in self._expanding_below:  # key *: the level that just loaded opens too
            parent = self.model.find(entity, entity_id)
            for row in range(self.model.rowCount(parent)):
                self._expand_subtree(self.model.index(row, 0, parent))

    def _before_reset(self) -> None:
        """A reset (feed gap) reloads everything: keep what the operator had open and selected."""
        self._reset_state = (self.expanded_ids(), self.current_selection())

    def _after_reset(self) -> None:
        expanded, current = self._reset_state
        self.restore_expanded(expanded)
        if current is not None:
            self.select_entity(*current)

    # -- expansion state for settings -----------------------------------------------------
    def expanded_ids(self) -> list[str]:
        """Expanded rows as "entity:id", parents first (what `restore_expanded` takes)."""
        out = []
        for entity, entity_id in self.model.branch_keys():  # runs have no children to expand
            index = self.proxy.mapFromSource(self.model.find(entity, entity_id))
            if index.isValid() and self.view.isExpanded(index):
                out.append(f"{entity}:{entity_id}")
        return out

    def restore_expanded(self, ids: Iterable[str]) -> None:
        """Expand these rows as they load (children arrive asynchronously)."""
        for item in ids:
            entity, _, entity_id = str(item).partition(":")
            if entity and entity_id:
                self._to_expand.add((entity, entity_id))
        self._expand_pending()

    def _expand_pending(self) -> None:
        for key in list(self._to_expand):
            index = self.model.find(*key)
            if index.isValid():
                self._to_expand.discard(key)
                self._expand(index)
