"""The diff window: run A, a run B picked from A's agent's runs (or any run id typed in), and the result.

Everything it shows comes from `DiffLoader` (computed on the runner): the
totals header, the merged waterfall, and per aligned model call the context
items one call sent and the other did not. Agent text is plain text through
`shown_line`; the window never waits on the store.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QGuiApplication, QKeyEvent
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from agentdesk.gui.diff.waterfall import CHANGE_COLOURS, DiffWaterfall
from agentdesk.model.diff.loader import DiffLoader
from agentdesk.model.diff.rows import DiffRows
from agentdesk.model.plain import shown_line
from agentdesk.model.services import Services
from agentdesk.model.text import plural
from agentdesk.store import readmodel as rm
from agentdesk.store.analysis.align import Change
from agentdesk.store.analysis.run_diff import Totals
from agentdesk.store.text.durations import format_duration
from agentdesk.store.text.times import shown_time


def _plain(text: str) -> QLabel:
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


class DiffWindow(QWidget):
    """A top-level window; `compare(a, b)` or `start_from(a)` to pick B."""

    open_span = Signal(str, str)
    """(run id, span id): a row was double-clicked, show it in the timeline."""

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("Compare runs")
        self.resize(self._first_size())
        self.loader = DiffLoader(services, self)
        self.loader.loaded.connect(self._show)
        self.loader.failed.connect(self._failed)
        self.loader.candidates.connect(self._fill_candidates)
        self._run_a = ""
        self._rows: DiffRows | None = None
        self._build()

    def _build(self) -> None:
        self.run_a_label = _plain("Run A: -")
        self.run_b_box = QComboBox(self)
        self.run_b_box.setEditable(True)
        self.run_b_box.setMinimumWidth(420)
        self.run_b_edit = QLineEdit(self.run_b_box)
        self.run_b_edit.setPlaceholderText("another run of this agent, or any run id")
        self.run_b_box.setLineEdit(self.run_b_edit)
        self.compare_button = QPushButton("Compare", self)
        self.compare_button.clicked.connect(self._compare_clicked)
        self.run_b_edit.returnPressed.connect(self._compare_clicked)
        self.swap_button = QPushButton("Swap A ↔ B", self)
        self.swap_button.clicked.connect(self._swap)
        self.close_button = QPushButton("Close", self)
        self.close_button.setToolTip("Close this window (Esc)")
        self.close_button.clicked.connect(self.close)
        picker = QHBoxLayout()
        picker.addWidget(self.run_a_label, 1)
        picker.addWidget(_plain("Compare with:"))
        picker.addWidget(self.run_b_box, 2)
        picker.addWidget(self.compare_button)
        picker.addWidget(self.swap_button)
        picker.addWidget(self.close_button)

        self.message = _plain("Pick a run to compare with.")
        self.totals = QGridLayout()
        self.totals.setHorizontalSpacing(24)
        self.totals.setColumnStretch(6, 1)  # the figures stay together on the left, however wide the window
        self.counts = QLabel(self)
        self.counts.setTextFormat(Qt.TextFormat.RichText)  # only our own numbers and colours, no agent text

        self.waterfall = DiffWaterfall(self)
        self.waterfall.row_clicked.connect(self._row_clicked)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.waterfall)
        self.context_tree = QTreeWidget(self)
        self.context_tree.setHeaderLabels(["Context differences at aligned model calls", "Role"])
        self.context_tree.setColumnWidth(0, 900)
        splitter = QSplitter(Qt.Orientation.Vertical, self)
        splitter.addWidget(scroll)
        splitter.addWidget(self.context_tree)
        splitter.setSizes([560, 200])

        layout = QVBoxLayout(self)
        layout.addLayout(picker)
        layout.addWidget(self.message)
        layout.addLayout(self.totals)
        layout.addWidget(self.counts)
        layout.addWidget(splitter, 1)

    key_help: tuple[tuple[str, str, str], ...] = (("Compare runs", "Esc", "Close the window"),)
    """Keys this window handles itself (`keyPressEvent`), for the F1 sheet."""

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Esc closes the window, from any of its fields (they pass Esc on)."""
        if event.key() == Qt.Key.Key_Escape:
            self.close()
            return
        super().keyPressEvent(event)

    def _first_size(self) -> QSize:
        """1300 x 820 where the screen has room; else 90 % of it (a 1366 x 768 screen shows it whole)."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is None:
            return QSize(1300, 820)
        room = screen.availableGeometry().size()
        return QSize(min(1300, int(room.width() * 0.9)), min(820, int(room.height() * 0.9)))

    # -- picking ------------------------------------------------------------------------------
    def start_from(self, run_a: str) -> None:
        """Show run A and offer its agent's other runs as B."""
        self._run_a = run_a
        self.run_a_label.setText(f"Run A: {shown_line(run_a, 80)}")
        self.run_b_box.clear()
        self.loader.find_candidates(run_a)

    def compare(self, run_a: str, run_b: str) -> None:
        self._run_a = run_a
        self.run_a_label.setText(f"Run A: {shown_line(run_a, 80)}")
        known = self.run_b_box.findData(run_b)
        if known >= 0:  # one of A's agent's runs: show it as the list does (title, time, status)
            self.run_b_box.setCurrentIndex(known)
        else:
            self.run_b_box.setEditText(run_b)
        self.message.setText("Comparing…")
        self.loader.compare(run_a, run_b)

    def _fill_candidates(self, runs: list[rm.Run]) -> None:
        self.run_b_box.clear()
        for run in runs:
            when = shown_time(run.started_at, "%Y-%m-%d %H:%M", local=False)
            self.run_b_box.addItem(f"{shown_line(run.title, 60)} · {when} · {run.status}", run.id)
        self.message.setText(f"{plural(len(runs), 'other run')} of this agent; or type any run id." if runs else
                             "This agent has no other run: type any run id.")

    def _chosen_b(self) -> str:
        index = self.run_b_box.currentIndex()
        text = self.run_b_box.currentText().strip()
        if index >= 0 and self.run_b_box.itemText(index) == text:
            return str(self.run_b_box.itemData(index))
        return text

    def _compare_clicked(self) -> None:
        run_b = self._chosen_b()
        if not self._run_a or not run_b:
            self.message.setText("Pick a run to compare with.")
            return
        self.compare(self._run_a, run_b)

    def _swap(self) -> None:
        if self._rows is not None:
            self.compare(self._rows.diff.run_b.id, self._rows.diff.run_a.id)

    # -- showing ------------------------------------------------------------------------------
    def _failed(self, message: str) -> None:
        self.message.setText(shown_line(message, 300))

    def _show(self, rows: DiffRows) -> None:
        self._rows = rows
        diff = rows.diff
        self.run_a_label.setText(f"Run A: {shown_line(diff.run_a.title, 60)} ({diff.run_a.id})")
        self.message.setText(f"B: {shown_line(diff.run_b.title, 60)} ({diff.run_b.id})"
                             + ("  ·  " + " ".join(diff.notes) if diff.notes else ""))
        self._fill_totals(diff.totals_a, diff.totals_b)
        counts = diff.alignment.counts()
        self.counts.setText("  ".join(
            f"<span style='color:{CHANGE_COLOURS[c]}'>■</span> {counts[c]:,} {c.value}"
            for c in (Change.SAME, Change.SLOWER, Change.FASTER, Change.ADDED, Change.REMOVED)))
        self.waterfall.set_rows(rows)
        self.context_tree.clear()
        for delta in diff.contexts:
            top = QTreeWidgetItem([f"{shown_line(delta.name, 80)}: {len(delta.only_a)} only in A, "
                                   f"{len(delta.only_b)} only in B", ""])
            for sign, items in (("-", delta.only_a), ("+", delta.only_b)):
                for item in items:
                    top.addChild(QTreeWidgetItem([f"{sign} {shown_line(item.content, 300)}",
                                                  shown_line(item.role or item.kind, 20)]))
            self.context_tree.addTopLevelItem(top)
            top.setExpanded(True)
        if not diff.contexts:
            self.context_tree.addTopLevelItem(QTreeWidgetItem(["The aligned model calls sent the same context.", ""]))

    def _fill_totals(self, a: Totals, b: Totals) -> None:
        while self.totals.count():
            item = self.totals.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        header = ["", "spans", "tokens", "cost", "duration", "errors"]
        values = [
            ["A", f"{a.spans:,}", f"{a.tokens:,}", f"${a.cost_usd:.4f}", format_duration(a.duration_s, unknown="-"),
             str(a.errors)],
            ["B", f"{b.spans:,}", f"{b.tokens:,}", f"${b.cost_usd:.4f}", format_duration(b.duration_s, unknown="-"),
             str(b.errors)],
            ["B - A", f"{b.spans - a.spans:+,}", f"{b.tokens - a.tokens:+,}",
             f"{'-' if b.cost_usd < a.cost_usd else '+'}${abs(b.cost_usd - a.cost_usd):.4f}",
             "-" if a.duration_s is None or b.duration_s is None
             else format_duration(b.duration_s - a.duration_s, signed=True),
             f"{b.errors - a.errors:+}"],
        ]
        for column, text in enumerate(header):
            label = _plain(text)
            label.setStyleSheet("font-weight: bold")
            self.totals.addWidget(label, 0, column)
        for row, cells in enumerate(values, start=1):
            for column, text in enumerate(cells):
                self.totals.addWidget(_plain(text), row, column)

    def _row_clicked(self, index: int) -> None:
        if self._rows is None:
            return
        row = self._rows.rows[index]
        if row.b_span is not None:
            self.open_span.emit(self._rows.diff.run_b.id, row.b_span)
        elif row.a_span is not None:
            self.open_span.emit(self._rows.diff.run_a.id, row.a_span)
