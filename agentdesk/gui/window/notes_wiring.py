"""Notes and labels wired into the window: the marks cache, the panels in both detail panes, the tree's flag,
the timeline's flags and the Shift notes dock (View → Shift notes, Ctrl+Shift+H).

Kept out of `main_window.py` so the window composes one more feature by one call; every piece here talks to
the others only through the window's public surface.
"""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow

from agentdesk.gui.approvals.queue import ApprovalQueue
from agentdesk.gui.notes.panel import MarksPanel
from agentdesk.gui.notes.shift_view import ShiftNotesView
from agentdesk.gui.timeline.panel import TimelinePanel
from agentdesk.gui.tree.delegate import TreeDelegate
from agentdesk.gui.tree.view import ProjectTree
from agentdesk.model.notes.cache import MarksCache
from agentdesk.model.services import Services


class Host(Protocol):
    """What the wiring uses of the main window (a protocol: the window imports this module)."""

    services: Services
    tree: ProjectTree
    timeline: TimelinePanel
    queue: ApprovalQueue

    def report_error(self, text: str) -> None: ...
    def show_in_timeline(self, run_id: str, span_id: str) -> None: ...
    def select(self, entity: str, entity_id: str) -> None: ...


class NotesWiring:
    def __init__(self, window: Host, main: QMainWindow) -> None:
        self.window, self.main = window, main
        services = window.services
        self.cache = MarksCache(services, main)
        self.span_panel = MarksPanel(services, self.cache, main)
        window.timeline.details.extras.addWidget(self.span_panel)
        window.timeline.details.span_shown.connect(
            lambda span, run: self.span_panel.show_target("span", span, run))
        self.approval_panel = MarksPanel(services, self.cache, main)
        window.queue.details.extras.addWidget(self.approval_panel)
        window.queue.details.approval_shown.connect(
            lambda approval, run: self.approval_panel.show_target("approval", approval, run))
        for panel in (self.span_panel, self.approval_panel):
            panel.failed.connect(window.report_error)
            panel.setVisible(False)
        delegate = window.tree.view.itemDelegate()
        if isinstance(delegate, TreeDelegate):
            delegate.marked = self.cache.run_text
        window.tree.run_selected.connect(self.cache.watch_run)
        window.timeline.details.span_shown.connect(lambda _span, run: self.cache.watch_run(run) if run else None)
        self.cache.changed.connect(self._repaint)
        self.shift = ShiftNotesView(services, main)
        self.shift.reveal.connect(self.reveal)
        self.dock = QDockWidget("Shift notes", main)
        self.dock.setObjectName("shift_notes_dock")
        self.dock.setWidget(self.shift)
        self.dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                              | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                              | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        main.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.dock)
        self.dock.hide()
        self.action = QAction("Shift notes", main)
        self.action.setShortcut(QKeySequence("Ctrl+Shift+H"))
        self.action.setToolTip("Everything noted or labelled since a time (8 hours by default), with who wrote it")
        self.action.triggered.connect(self.show_shift)

    def show_shift(self) -> None:
        first = not self.dock.isVisible()
        self.dock.show()
        self.dock.raise_()
        if first and not self.dock.isFloating():  # a third of the height: the timeline stays readable
            self.main.resizeDocks([self.dock], [max(160, self.main.height() // 3)], Qt.Orientation.Vertical)
        self.shift.refresh()

    def reveal(self, kind: str, target_id: str, run_id: str) -> None:
        """A line of Shift notes double-clicked: the span in the timeline, the run, or the approval."""
        window = self.window
        if kind == "span":
            window.show_in_timeline(run_id, target_id)
        elif kind == "run":
            window.show_in_timeline(run_id, "")
        else:
            window.select("approval", target_id)

    def _repaint(self) -> None:
        self.window.tree.view.viewport().update()
        window = self.window
        run = window.timeline.run_id
        if run != self.cache.run_id:
            self.cache.watch_run(run)
        window.timeline.set_flagged(frozenset(self.cache.spans) if run == self.cache.run_id else frozenset())
