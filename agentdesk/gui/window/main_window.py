"""The operator's main window: tree on the left, timeline and context in the centre, queue docked.

The window only wires views together; each view talks to the store through
`Services` on its own. Layout, geometry, the last selection and the operator's
name persist in settings.
"""

from __future__ import annotations

import getpass
import hashlib
import json

from PySide6.QtCore import QByteArray, QSize, Qt
from PySide6.QtGui import QAction, QCloseEvent, QGuiApplication, QIcon, QKeySequence, QShowEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QFrame,
    QInputDialog,
    QMainWindow,
    QScrollArea,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from agentdesk.gui.approvals.queue import ApprovalQueue
from agentdesk.gui.context.editor import ContextEditor
from agentdesk.gui.control.menu import add_control_actions
from agentdesk.gui.control.toolbar import RunControlBar
from agentdesk.gui.diff.window import DiffWindow
from agentdesk.gui.ingest.dialog import import_into_window, why_not_import
from agentdesk.gui.rules.panel import RulesPanel
from agentdesk.gui.search.dialog import SearchDialog
from agentdesk.gui.timeline.panel import TimelinePanel
from agentdesk.gui.tree.view import ProjectTree
from agentdesk.gui.window.dock_strip import FoldingDock
from agentdesk.gui.window.file_menu import StoreMenu
from agentdesk.gui.window.message_bar import MessageBar
from agentdesk.gui.window.messaging import Messaging
from agentdesk.gui.window.notes_wiring import NotesWiring
from agentdesk.gui.window.notify import TrayNotifier
from agentdesk.gui.window.receiver_toggle import ReceiverToggle
from agentdesk.gui.window.settings import open_settings, read_str
from agentdesk.gui.window.shortcuts_help import ShortcutsDialog
from agentdesk.gui.window.status_bar import StoreStatusBar
from agentdesk.model.control.run_control import RunControlModel
from agentdesk.model.plain import shown_line
from agentdesk.model.rules.applier import RuleApplier, decided_line
from agentdesk.model.services import Services
from agentdesk.model.tasks import spawn
from agentdesk.resources import ICON, resource_path
from agentdesk.store import readmodel as rm

TIMELINE_TAB, CONTEXT_TAB, RULES_TAB = 0, 1, 2
TREE_MIN_WIDTH, QUEUE_MIN_WIDTH, CENTRE_MIN_WIDTH = 200, 280, 460
"""Together (with the dock separators) under 1024 px, so the window fits a 1024 px screen; the centre
keeps room for the timeline's axis labels, legend and detail tabs."""
CENTRE_PREFERRED_WIDTH = 800
"""What the docks leave the centre at the first show when the screen allows (1366 px: tree 254, queue 312)."""


def fitting_size(wanted: QSize, available: QSize) -> QSize:
    """The first window size: what the layout wants, but never more than 90 % of the screen's free area."""
    return QSize(min(wanted.width(), int(available.width() * 0.9)),
                 min(wanted.height(), int(available.height() * 0.9)))


def scrolling(widget: QWidget) -> QScrollArea:
    """Scrolls up and down only: sideways, the content follows the dock's width (its text and buttons
    wrap), so nothing sits hidden past the right edge behind a scroll bar nobody looks at."""
    area = QScrollArea()
    area.setWidget(widget)
    area.setWidgetResizable(True)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setFrameShape(QFrame.Shape.NoFrame)
    return area


def app_icon() -> QIcon:
    return QIcon(str(resource_path(ICON)))


class MainWindow(QMainWindow):
    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.follow_first_approval = False
        """Set by the demo: when the first approval arrives, show its run and select it."""
        self.settings = open_settings()
        services.actor = read_str(self.settings, "operator/name") or services.actor
        self.setWindowTitle(shown_line(f"agentdesk — {services.source.descriptor.location}", 300))
        self.setWindowIcon(app_icon())
        self.resize(self._first_size())

        self.tree = ProjectTree(services, self)
        self.timeline = TimelinePanel(services, self)
        self.context_editor = ContextEditor(services, self)
        self.queue = ApprovalQueue(services, self)
        self.rules = RulesPanel(services, self, current_approval=self.queue.current_approval)
        self.notifier = TrayNotifier(self)

        self.tabs = QTabWidget(self)
        self.tabs.setMinimumWidth(CENTRE_MIN_WIDTH)
        self.tabs.addTab(self.timeline, "Timeline")
        self.tabs.addTab(self.context_editor, "Context")
        self.tabs.addTab(self.rules, "Rules")
        self.message_bar = MessageBar(self)
        self.run_control = RunControlModel(services, self)
        self.run_controls = RunControlBar(self.run_control, self)
        centre = QWidget(self)
        column = QVBoxLayout(centre)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        column.addWidget(self.message_bar)
        column.addWidget(self.run_controls)
        column.addWidget(self.tabs, 1)
        self.setCentralWidget(centre)
        self.tree_dock = self._dock("Projects", "tree_dock", self.tree, Qt.DockWidgetArea.LeftDockWidgetArea)
        # In a (vertical) scroll area the dock can give way on a 768 px high screen.
        self.queue.setMinimumWidth(QUEUE_MIN_WIDTH // 2)  # explicit: no content can make it wider than the dock
        self.queue_scroll = scrolling(self.queue)
        self.queue_dock = self._dock("Approvals", "queue_dock", self.queue_scroll,
                                     Qt.DockWidgetArea.RightDockWidgetArea)
        self.queue_fold = FoldingDock(self, self.queue_dock, self.queue_scroll, QUEUE_MIN_WIDTH)
        self.queue_fold.strip.clicked.connect(lambda: self._focus(self.queue_dock, self.queue))
        self.tree_dock.setMinimumWidth(TREE_MIN_WIDTH)
        self.queue_dock.setMinimumWidth(QUEUE_MIN_WIDTH)
        self._docks_sized = False
        self.status = StoreStatusBar(services, self)
        self.setStatusBar(self.status)
        self.rule_applier = RuleApplier(services, self)  # PostgreSQL, operator or admin: rules agent logins' requests
        self.rule_applier.decided.connect(lambda applied: self.status.showMessage(decided_line(applied), 10_000))
        self.receiver = ReceiverToggle(services, self.settings, self.status)
        self.status.insertPermanentWidget(0, self.receiver)
        self._wire()
        self.notes = NotesWiring(self, self)
        self._actions()

    def _first_size(self) -> QSize:
        screen = self.screen() or QGuiApplication.primaryScreen()
        wanted = QSize(1600, 1000)
        return wanted if screen is None else fitting_size(wanted, screen.availableGeometry().size())

    def showEvent(self, event: QShowEvent) -> None:
        """The docks are sized once, at the first show, when the window's real width is known (a saved
        layout restored afterwards still wins)."""
        super().showEvent(event)
        if not self._docks_sized:
            self._docks_sized = True
            self._size_docks()

    def _size_docks(self) -> None:
        """Room for names in the tree and for the countdown in the queue, in proportion to the window; the
        centre (timeline, context, rules) keeps at least CENTRE_MIN_WIDTH."""
        spare = max(0, self.width() - CENTRE_PREFERRED_WIDTH)
        tree = max(TREE_MIN_WIDTH, min(420, int(spare * 0.45)))
        queue = max(QUEUE_MIN_WIDTH, min(450, spare - tree))
        self.resizeDocks([self.tree_dock, self.queue_dock], [tree, queue], Qt.Orientation.Horizontal)

    def _dock(self, title: str, name: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QDockWidget.DockWidgetFeature.DockWidgetFloatable)
        self.addDockWidget(area, dock)
        return dock

    def _wire(self) -> None:
        self.tree.run_selected.connect(self.timeline.show_run)
        self.tree.run_selected.connect(self.run_control.set_run)
        self.tree.menu_extenders.append(lambda menu, index: add_control_actions(menu, self.run_control, index,
                                                                                 self))
        self.run_control.reported.connect(lambda text: self.status.showMessage(shown_line(text, 600), 10_000))
        self.tree.compare_requested.connect(lambda a, b: self.compare_runs(a, b or None))
        self.tree.agent_selected.connect(self.context_editor.show_agent)
        self.tree.selection_changed.connect(self._remember_selection)
        self.queue.pending_count_changed.connect(self._on_pending)
        self.queue.questions_count_changed.connect(self._on_questions)
        self.queue.pending_model.gone_changed.connect(lambda _gone: self._show_waiting_agents())
        self.queue.pending_model.loaded.connect(lambda: self._fold_queue(self.queue.pending_model.rowCount()
                                                                         + self.queue.questions.model.pending))
        self.queue.pending_count_changed.connect(self.notifier.pending_changed)
        self.rules.draft_settles.connect(self.queue.pending_model.set_settles)
        self.tabs.currentChanged.connect(self._on_tab)
        self.queue.show_in_timeline.connect(self.show_in_timeline)
        self.queue.show_context.connect(self.show_context)
        self.context_editor.conflict.connect(lambda text: self.status.showMessage(shown_line(text, 600), 10_000))
        self.messaging = Messaging(self, self.services, self.status, self.report_error)
        for view in (self.tree, self.timeline, self.context_editor):
            view.message_requested.connect(self.messaging.open)
        # a store call that failed with nobody to answer it: kept in the message bar, not 8 s in the status bar
        self.services.runner.error.connect(lambda text: self.message_bar.show_error(f"A store call failed: {text}"))

    def _actions(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.store_menu = StoreMenu(self, file_menu, self.settings, self.services.source.descriptor.location,
                                    self.services.runner, self.report_error)
        importing = QAction("Import OpenTelemetry traces…", self)
        importing.setShortcut(QKeySequence("Ctrl+I"))
        refusal = why_not_import(self.services)
        importing.setEnabled(refusal is None)
        importing.setToolTip(refusal or "OTLP/JSON, JSON Lines or protobuf files; runs in the background")
        importing.triggered.connect(self.import_traces)
        file_menu.addAction(importing)
        file_menu.addSeparator()
        quitting = QAction("&Quit", self)
        quitting.setShortcut(QKeySequence("Ctrl+Q"))  # Cmd+Q on macOS; Windows has no standard Quit key
        quitting.setMenuRole(QAction.MenuRole.QuitRole)
        quitting.triggered.connect(self.quit)
        file_menu.addAction(quitting)
        self.quit_action = quitting
        view = self.menuBar().addMenu("&View")
        go = self.menuBar().addMenu("&Go")
        help_menu = self.menuBar().addMenu("&Help")
        for menu, text, keys, slot in (
            (go, "Project tree", "Ctrl+1", lambda: self._focus(self.tree_dock, self.tree)),
            (go, "Timeline", "Ctrl+2", lambda: self._show_tab(TIMELINE_TAB)),
            (go, "Context editor", "Ctrl+3", lambda: self._show_tab(CONTEXT_TAB)),
            (go, "Approval queue", "Ctrl+4", lambda: self._focus(self.queue_dock, self.queue)),
            (go, "Rules", "Ctrl+5", lambda: self._show_tab(RULES_TAB)),
            (go, "Rule from the selected approval", "Ctrl+R", self.rule_from_selected_approval),
            (go, "Search all runs…", "Ctrl+Shift+F", self.search_all_runs),
            (go, "Compare this run with…", "Ctrl+Shift+D", self.compare_runs),
            (view, "Reset layout", "Ctrl+Shift+R", self.reset_layout),
            (help_menu, "Keyboard shortcuts", "F1", self.show_shortcuts),
            (help_menu, "Set operator name…", "Ctrl+Shift+N", self.ask_operator_name),
        ):
            action = QAction(text, self)
            action.setShortcut(QKeySequence(keys))
            action.triggered.connect(slot)
            menu.addAction(action)
        view.addAction(self.tree_dock.toggleViewAction())
        view.addAction(self.queue_dock.toggleViewAction())
        view.addAction(self.notes.action)
        view.addSeparator()
        view.addAction(self.receiver.action)
        view.addAction(self.receiver.port_action)

    def report_error(self, text: str) -> None:
        """A failure the operator must see: in the message bar until dismissed, and in the status bar."""
        self.message_bar.show_error(text)
        self.status.showMessage(shown_line(text, 300), 15_000)

    def quit(self) -> None:
        """File → Quit (Ctrl+Q): close the window (which saves the layout), then end the event loop."""
        if self.close():
            app = QGuiApplication.instance()
            if app is not None:
                app.quit()

    # -- analysis windows (issue 10): cross-store search and run diff -----------------------
    def search_all_runs(self) -> None:
        """Go → Search all runs (Ctrl+Shift+F); one dialog kept, so the last query and results stay."""
        if getattr(self, "_search_dialog", None) is None:
            self._search_dialog = SearchDialog(self.services, self)
            self._search_dialog.open_hit.connect(self.show_in_timeline)
        self._search_dialog.start()

    def compare_runs(self, run_a: str | None = None, run_b: str | None = None) -> None:
        """Go → Compare this run with… (Ctrl+Shift+D): the timeline's run as A, B picked in the window."""
        run_a = run_a or self.timeline.run_id
        if not run_a:
            self.status.showMessage("Select a run first: it is compared with another.", 5000)
            return
        if getattr(self, "_diff_window", None) is None:
            self._diff_window = DiffWindow(self.services, self)
            self._diff_window.open_span.connect(self.show_in_timeline)
        if run_b:
            self._diff_window.compare(run_a, run_b)
        else:
            self._diff_window.start_from(run_a)
        self._diff_window.show()
        self._diff_window.raise_()

    def import_traces(self) -> None:
        """File → Import…; the dialog is kept until the next import so its job can report back."""
        self._import_dialog = import_into_window(self.services, self)
        if self._import_dialog is not None:
            self._import_dialog.failed.connect(self.report_error)

    # -- navigation -----------------------------------------------------------------------
    def _focus(self, dock: QDockWidget, widget: QWidget) -> None:
        if dock is self.queue_dock:
            self.queue_fold.unfold()  # asked for by hand: it stays open while nothing is pending
        dock.show()
        dock.raise_()
        widget.setFocus()

    def _show_tab(self, index: int) -> None:
        self.tabs.setCurrentIndex(index)
        widget = self.tabs.currentWidget()
        if widget is not None:
            widget.setFocus()

    def show_in_timeline(self, run_id: str, span_id: str) -> None:
        self.tree.select_entity("run", run_id)
        self.timeline.show_run(run_id)
        if span_id:
            self.timeline.select_span(span_id)
        self._show_tab(TIMELINE_TAB)

    def show_context(self, agent_id: str, approval_id: str) -> None:
        if approval_id:
            spawn(self._show_context_at(agent_id, approval_id), error_signal=self.services.runner.error)
        else:
            self.context_editor.show_agent(agent_id, None)
            self._show_tab(CONTEXT_TAB)

    async def _show_context_at(self, agent_id: str, approval_id: str) -> None:
        """The agent's context as it was when the approval was asked for."""
        approval: rm.Approval = await self.services.runner.run(self.services.source.approval, approval_id)
        self.context_editor.show_agent(agent_id, approval.created_at)
        self._show_tab(CONTEXT_TAB)

    def rule_from_selected_approval(self) -> None:
        """"Create a rule from this approval": the narrowest rule, in the Rules tab, not yet saved."""
        self._show_tab(RULES_TAB)
        self.rules.propose_from_selected()

    def _on_tab(self, index: int) -> None:
        """The queue marks what the draft rule would settle only while the Rules tab is in front."""
        if index == RULES_TAB:
            self.rules.run_dry_run()
        else:
            self.queue.pending_model.set_settles(set(), "")

    def _queue_title(self) -> None:
        count, questions = self.queue.pending_model.awaiting_count(), self.queue.questions.model.pending
        asked = f" · {questions} question{'s' if questions != 1 else ''}" if questions else ""
        self.queue_dock.setWindowTitle(f"Approvals ({count} pending{asked})")

    def _on_questions(self, questions: int) -> None:
        """A question waits for a person like an approval does: named in the dock's title, and it opens the queue."""
        self._queue_title()
        self._show_waiting_agents()
        if questions:
            self._fold_queue(questions)

    def _on_pending(self, count: int) -> None:
        self._queue_title()
        self._fold_queue(self.queue.pending_model.rowCount() + self.queue.questions.model.pending)  # overdue rows are
        waiting = self._show_waiting_agents()  # still shown, so they keep the queue open; they are not counted
        if self.follow_first_approval and waiting:
            self.follow_first_approval = False
            self._show_first_approval()

    def _show_waiting_agents(self) -> set[str]:
        """Agents blocked on the operator: a pending approval that has not expired and whose requester still
        beats (one that stopped beating has nobody behind it: it is not an agent waiting for you), or a pending
        question. Returns the agents waiting on an approval (the demo follows the first one)."""
        model = self.queue.pending_model
        waiting = {a.agent_id for row in range(model.rowCount()) if (a := model.approval_at(row)) is not None
                   and not model.is_expired(a) and not model.is_gone(a)}
        asks = self.queue.questions.model
        asking = {q.agent_id for row in range(asks.pending) if (q := asks.ask_at(row)) is not None}
        self.status.set_pending(model.awaiting_count(), len(waiting | asking), asks.pending)
        return waiting

    def _fold_queue(self, count: int) -> None:
        """Nothing pending: the queue folds to a strip and the timeline gets its width (unless it is
        docked at the top or bottom, floating, or showing a decided approval); anything pending opens it."""
        if count:
            self.queue_fold.unfold()
            return
        area = self.dockWidgetArea(self.queue_dock)
        side = area in (Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea)
        if side and not self.queue_dock.isFloating() and self.queue.current_approval() is None \
                and self.queue.pending_model.is_loaded:
            self.queue_fold.fold("Approvals · none pending")

    def _show_first_approval(self) -> None:
        """The demo's first approval: its run in the timeline and the approval selected in the queue, so the
        first thing a new user sees waiting is also what the window shows."""
        model = self.queue.pending_model
        first = next((a for row in range(model.rowCount()) if (a := model.approval_at(row)) is not None
                      and not model.is_expired(a)), None)
        if first is not None:
            self.show_in_timeline(first.run_id, first.span_id or "")
            self.queue.select_approval(first.id)

    def _remember_selection(self, entity: str, entity_id: str) -> None:
        self.settings.setValue(self._selection_key("entity"), entity)
        self.settings.setValue(self._selection_key("id"), entity_id)

    def show_shortcuts(self) -> None:
        self._shortcuts_dialog = ShortcutsDialog(self)
        self._shortcuts_dialog.open()

    # -- operator name and layout ---------------------------------------------------------
    def ask_operator_name(self) -> None:
        dialog = QInputDialog(self)
        dialog.setWindowTitle("Operator name")
        dialog.setLabelText("Your name is recorded with every approval, denial and edit:")
        dialog.setTextValue(self.services.actor if self.services.actor != "operator" else getpass.getuser())
        dialog.textValueSelected.connect(self._set_operator_name)
        dialog.setWindowModality(Qt.WindowModality.NonModal)  # the window stays usable while it is asked
        dialog.show()
        self._name_dialog = dialog

    def _set_operator_name(self, name: str) -> None:
        name = name.strip()
        if name:
            self.services.actor = name
            self.settings.setValue("operator/name", name)
            self.status.showMessage(f"Decisions will be recorded as {name}.", 5000)

    def ensure_operator_name(self) -> None:
        if not read_str(self.settings, "operator/name"):
            self.ask_operator_name()

    def restore_state(self, *, restore_selection: bool = True) -> None:
        """Layout, then (unless the caller selects something itself) the last selection on this store."""
        geometry = self.settings.value("window/geometry")
        state = self.settings.value("window/state")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        if isinstance(state, QByteArray):
            self.restoreState(state)
        try:
            shares = json.loads(read_str(self.settings, "timeline/details_share", "{}"))
        except ValueError:
            shares = {}
        if isinstance(shares, dict):
            self.timeline.restore_split_shares(shares)
        if not restore_selection:
            return
        entity = read_str(self.settings, self._selection_key("entity"))
        entity_id = read_str(self.settings, self._selection_key("id"))
        if entity and entity_id:
            self.select(entity, entity_id)
        else:  # first time on this store: start on the run most worth looking at
            spawn(self._select_showcase(), error_signal=self.services.runner.error)

    async def _select_showcase(self) -> None:
        run_id: str | None = await self.services.runner.run(self.services.source.showcase_run)
        if run_id:
            self.select("run", run_id)

    def _selection_key(self, field: str) -> str:
        """The last selection is remembered per store: ids mean nothing in another one."""
        store = hashlib.sha256(self.services.source.descriptor.location.encode()).hexdigest()[:16]
        return f"selection/{store}/{field}"

    def select(self, entity: str, entity_id: str) -> None:
        """Select anything by id: tree rows, a span (its run, then the span) or an approval (in the queue,
        with its run and span in the timeline)."""
        if entity == "ask":
            self.queue.select_question(entity_id)
            return
        if entity == "approval":
            self.queue.select_approval(entity_id)
            spawn(self._show_approval_in_timeline(entity_id), error_signal=self.services.runner.error)
        self.tree.select_entity(entity, entity_id)
        if entity == "span":
            self.timeline.select_span(entity_id)

    async def _show_approval_in_timeline(self, approval_id: str) -> None:
        approval: rm.Approval = await self.services.runner.run(self.services.source.approval, approval_id)
        self.show_in_timeline(approval.run_id, approval.span_id or "")

    def reset_layout(self) -> None:
        for dock, area in ((self.tree_dock, Qt.DockWidgetArea.LeftDockWidgetArea),
                           (self.queue_dock, Qt.DockWidgetArea.RightDockWidgetArea)):
            dock.setFloating(False)
            self.addDockWidget(area, dock)
            dock.show()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        self.settings.setValue("timeline/details_share", json.dumps(self.timeline.split_shares()))
        self.settings.sync()
        self.context_editor.shutdown()
        self.rule_applier.stop()
        self.receiver.shutdown()
        super().closeEvent(event)
