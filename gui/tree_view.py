"""The project tree dock: a filter row above a lazy tree of projects > tasks > sessions > agents > runs.

Status shows as a coloured dot plus a symbol and word; pending approvals as an
orange badge. `select_entity` reveals anything by id: it asks the store where
the thing sits (`locate`, on the runner), then loads each level on the way down
(paging an agent's runs until the run turns up) and selects the row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from PySide6.QtCore import QItemSelectionModel, QModelIndex, QPersistentModelIndex, QPoint, QRect, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QIcon,
    QKeySequence,
    QPainter,
    QPalette,
    QPixmap,
    QShortcut,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolButton,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from model.services import Services
from model.tree_filter import TreeFilterProxy
from model.tree_model import (
    INFO,
    NAME,
    PENDING,
    STATUS,
    EntityRole,
    PendingRole,
    ProjectTreeModel,
    StatusRole,
)
from store.source import Location

from .palette import STATUS_SYMBOLS, status_colour

Index = QModelIndex | QPersistentModelIndex
STATUSES = ("running", "waiting", "failed", "done", "idle", "cancelled", "pending")
REVEAL_PAGE = 2_000
REVEAL_MAX_RUNS = 20_000
"""Revealing a run pages through its agent's runs newest first; older runs than this are not searched."""
BADGE_COLOUR = "#f0a020"
FALLBACK_SYMBOLS = {"waiting": "‖"}
"""For fonts without the shared symbol (⏸ is missing from many)."""


def status_symbol(status: str, metrics: QFontMetrics) -> str:
    symbol = STATUS_SYMBOLS.get(status, "•")
    if not metrics.inFontUcs4(ord(symbol[0])):
        symbol = FALLBACK_SYMBOLS.get(status, "•")
    return symbol


def readable(colour: QColor, palette: QPalette) -> QColor:
    """Status colours are mid-tones: darken them a little on light backgrounds so text stays legible."""
    return colour.darker(135) if palette.color(QPalette.ColorRole.Base).lightness() > 128 else colour


class StatusIcons:
    """A coloured dot per status, painted once and cached."""

    def __init__(self, size: int = 12) -> None:
        self._size = size
        self._icons: dict[str, QIcon] = {}

    def __call__(self, status: str) -> QIcon:
        icon = self._icons.get(status)
        if icon is None:
            icon = self._icons[status] = self._paint(status)
        return icon

    def _paint(self, status: str) -> QIcon:
        scale = 2
        pixmap = QPixmap(self._size * scale, self._size * scale)
        pixmap.setDevicePixelRatio(scale)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        colour = status_colour(status)
        inset = 1.5
        diameter = self._size - 2 * inset
        if status in ("idle", "cancelled"):  # hollow: nothing is happening
            painter.setPen(colour)
            painter.setBrush(Qt.BrushStyle.NoBrush)
        else:
            painter.setPen(colour.darker(120))
            painter.setBrush(colour)
        painter.drawEllipse(int(inset), int(inset), int(diameter), int(diameter))
        painter.end()
        icon = QIcon(pixmap)
        icon.addPixmap(pixmap, QIcon.Mode.Selected)  # keep the colour on the highlighted row
        return icon


class TreeDelegate(QStyledItemDelegate):
    """Status as symbol + word in its colour; pending approvals as an orange count badge."""

    def initStyleOption(self, option: QStyleOptionViewItem, index: Index) -> None:
        super().initStyleOption(option, index)
        if index.column() == STATUS:
            status = str(index.data(StatusRole) or "")
            option.text = f"{status_symbol(status, option.fontMetrics)} {status}"  # type: ignore[attr-defined]
            if not option.state & QStyle.StateFlag.State_Selected:  # type: ignore[attr-defined]
                palette = option.palette  # type: ignore[attr-defined]
                palette.setColor(QPalette.ColorRole.Text, readable(status_colour(status), palette))
        elif index.column() == PENDING:
            option.text = ""  # type: ignore[attr-defined]  # painted as a badge

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        super().paint(painter, option, index)
        count = int(index.data(PendingRole) or 0) if index.column() == PENDING else 0
        if count > 0:
            self._badge(painter, option.rect, str(count))  # type: ignore[attr-defined]

    @staticmethod
    def _badge(painter: QPainter, cell: QRect, text: str) -> None:
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        font = QFont(painter.font())
        font.setBold(True)
        painter.setFont(font)
        height = max(12, cell.height() - 6)
        width = max(height, painter.fontMetrics().horizontalAdvance(text) + 10)
        badge = QRect(cell.center().x() - width // 2, cell.center().y() - height // 2 + 1, width, height)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(BADGE_COLOUR))
        painter.drawRoundedRect(badge, height / 2, height / 2)
        painter.setPen(QColor("#1b1300"))
        painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()


@dataclass
class _Reveal:
    seq: int
    path: list[tuple[str, str]]
    target: str


class ProjectTree(QWidget):
    run_selected = Signal(str)
    agent_selected = Signal(str)
    """An agent, or the agent of the selected run."""
    selection_changed = Signal(str, str)
    status_message = Signal(str)

    def __init__(self, services: Services, parent: QWidget | None = None, *,
                 page_size: int | None = None) -> None:
        super().__init__(parent)
        self._services = services
        extra = {} if page_size is None else {"page_size": page_size}
        self.model = ProjectTreeModel(services, self, status_icon=StatusIcons(), **extra)
        self.proxy = TreeFilterProxy(self)
        self.proxy.setSourceModel(self.model)
        self._reveal: _Reveal | None = None
        self._reveal_seq = 0
        self._to_expand: set[tuple[str, str]] = set()
        self._unfiltered_expansion: list[str] = []
        self._quiet = False
        self._last_key: tuple[str, str] | None = None
        self._reset_state: tuple[list[str], tuple[str, str] | None] = ([], None)
        self._build()
        self._connect()

    # -- layout ---------------------------------------------------------------------------
    def _build(self) -> None:
        self.filter_edit = QLineEdit(self)
        self.filter_edit.setPlaceholderText("Filter by name  (Ctrl+F)")
        self.filter_edit.setClearButtonEnabled(True)
        self.status_combo = QComboBox(self)
        self.status_combo.addItem("All statuses", "")
        for status in STATUSES:
            self.status_combo.addItem(f"{status_symbol(status, self.fontMetrics())} {status}", status)
        self.status_combo.setToolTip("Show only rows with this status (and the rows above them)")
        self.pending_button = QToolButton(self)
        self.pending_button.setText("Pending only")
        self.pending_button.setCheckable(True)
        self.pending_button.setToolTip("Show only rows with approvals waiting for a decision")
        self.view = QTreeView(self)
        self.view.setModel(self.proxy)
        self.view.setItemDelegate(TreeDelegate(self.view))
        self.view.setUniformRowHeights(True)
        self.view.setAllColumnsShowFocus(True)
        self.view.setAlternatingRowColors(True)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        header = self.view.header()
        # Names matter most: they get a fixed generous width; Info takes what is left (and scrolls).
        header.setStretchLastSection(True)
        for column, width in ((NAME, 230), (STATUS, 88), (PENDING, 58), (INFO, 160)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Interactive)
            header.resizeSection(column, width)
        self.message = QLabel(self)
        self.message.setTextFormat(Qt.TextFormat.PlainText)
        self.message.setWordWrap(True)
        self.message.hide()
        row = QHBoxLayout()
        row.addWidget(self.filter_edit, 1)
        row.addWidget(self.status_combo)
        row.addWidget(self.pending_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.message)
        self.setFocusProxy(self.view)

    def _connect(self) -> None:
        self.filter_edit.textChanged.connect(lambda text: self._refilter(lambda: self.proxy.set_text(text)))
        self.filter_edit.returnPressed.connect(self.view.setFocus)
        self.status_combo.currentIndexChanged.connect(
            lambda _: self._refilter(lambda: self.proxy.set_status(self.status_combo.currentData() or "")))
        self.pending_button.toggled.connect(
            lambda on: self._refilter(lambda: self.proxy.set_pending_only(on)))
        find = QShortcut(QKeySequence.StandardKey.Find, self,
                         context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
        find.activated.connect(self._focus_filter)
        clear = QShortcut(QKeySequence(Qt.Key.Key_Escape), self.filter_edit,
                          context=Qt.ShortcutContext.WidgetShortcut)
        clear.activated.connect(self._leave_filter)
        selection = self.view.selectionModel()
        selection.currentChanged.connect(self._on_current)
        self.view.verticalScrollBar().valueChanged.connect(self._fetch_visible_tail)
        self.model.children_loaded.connect(self._on_children_loaded)
        self.model.modelAboutToBeReset.connect(self._before_reset)
        self.model.modelReset.connect(self._after_reset)
        self.model.load_failed.connect(self.show_message)

    def _focus_filter(self) -> None:
        self.filter_edit.setFocus()
        self.filter_edit.selectAll()

    def _leave_filter(self) -> None:
        self.filter_edit.clear()
        self.view.setFocus()

    def show_message(self, text: str) -> None:
        self.message.setText(text)
        self.message.setVisible(bool(text))
        if text:
            self.status_message.emit(text)

    # -- selection ------------------------------------------------------------------------
    def _source(self, proxy_index: Index) -> QModelIndex:
        return self.proxy.mapToSource(proxy_index) if proxy_index.isValid() else QModelIndex()

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

    def clear_filters(self) -> None:
        for widget in (self.filter_edit, self.status_combo, self.pending_button):
            widget.blockSignals(True)
        self.filter_edit.clear()
        self.status_combo.setCurrentIndex(0)
        self.pending_button.setChecked(False)
        for widget in (self.filter_edit, self.status_combo, self.pending_button):
            widget.blockSignals(False)
        self._refilter(self.proxy.clear)

    def _refilter(self, change: Callable[[], object]) -> None:
        """Apply a filter change; show the matches expanded, and give the old view back when cleared."""
        current = self.current_selection() or self._last_key
        if not self.proxy.active:
            self._unfiltered_expansion = self.expanded_ids()
        change()
        if self.proxy.active:
            self._expand_matches()
        else:
            self.restore_expanded(self._unfiltered_expansion)
        if current is not None and not self.view.currentIndex().isValid():
            index = self.proxy.mapFromSource(self.model.find(*current))
            if index.isValid():
                self._quiet = True  # the same row again: nobody needs to hear about it
                self.view.setCurrentIndex(index)
                self._quiet = False

    def _expand_matches(self) -> None:
        stack = [QModelIndex()]
        while stack:
            parent = stack.pop()
            for row in range(self.proxy.rowCount(parent)):
                index = self.proxy.index(row, 0, parent)
                if self.proxy.rowCount(index):
                    self.view.expand(index)
                    stack.append(index)

    # -- revealing by id ------------------------------------------------------------------
    def select_entity(self, entity: str, entity_id: str) -> None:
        """Expand down to a project/task/session/agent/run (or a span's or approval's run) and select it."""
        self._reveal_seq += 1
        seq = self._reveal_seq
        self._services.runner.submit(
            self._services.source.locate, entity, entity_id,
            on_done=lambda location: self._start_reveal(seq, entity_id, location),
            on_error=lambda exc: self._reveal_failed(seq, f"Cannot show {entity} {entity_id}: {exc}"))

    def _start_reveal(self, seq: int, target: str, location: Location) -> None:
        if seq != self._reveal_seq:
            return
        path = [("project", location.project_id)]
        levels = (("task", location.task_id), ("session", location.session_id))
        path += [(entity, value) for entity, value in levels if value]
        path += [("agent", agent_id) for agent_id in location.agent_ids]
        if location.run_id:
            path.append(("run", location.run_id))
        self._reveal = _Reveal(seq, path, target)
        self._step_reveal()

    def _reveal_failed(self, seq: int, text: str) -> None:
        if seq == self._reveal_seq:
            self._reveal = None
            self.show_message(text)

    def _step_reveal(self) -> None:
        reveal = self._reveal
        if reveal is None:
            return
        parent = QModelIndex()
        for entity, entity_id in reveal.path:
            index = self.model.find(entity, entity_id)
            if not index.isValid():
                self._load_towards(reveal, parent, entity, entity_id)
                return
            parent = index
        self._reveal = None
        for entity, entity_id in reveal.path[:-1]:
            self._expand(self.model.find(entity, entity_id))
        self._select(parent)
        self.show_message("")

    def _load_towards(self, reveal: _Reveal, parent: QModelIndex, entity: str, entity_id: str) -> None:
        if self.model.is_loading(parent):
            return  # children_loaded brings us back
        if entity == "run":
            shown, total = self.model.runs_shown(parent.data(EntityRole)[1])
            if shown >= REVEAL_MAX_RUNS:
                self._reveal_failed(reveal.seq, f"Run {entity_id} is older than the newest {shown:,} of "
                                                f"{total:,} runs of its agent; it is not shown in the tree.")
                return
        if not self.model.fetch_more(parent, REVEAL_PAGE if entity == "run" else None):
            self._reveal_failed(reveal.seq, f"Could not find {entity} {entity_id} in the tree.")

    def _expand(self, source_index: QModelIndex) -> None:
        if self.model.canFetchMore(source_index) and not self.model.is_loaded(source_index):
            self.model.fetchMore(source_index)
        index = self.proxy.mapFromSource(source_index)
        if index.isValid():
            self.view.expand(index)

    def _on_children_loaded(self, _entity: str, _entity_id: str) -> None:
        self._step_reveal()
        self._expand_pending()

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
        for entity, entity_id in self.model.loaded_keys():
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

