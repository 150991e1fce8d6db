"""The approval queue's details pane: what was asked, by whom, until when, and exactly which arguments.

All of it is agent text: labels are fixed to plain text and everything passes
through `visible`, so bidi controls, zero-width and tag characters, escape
sequences and line separators show as marks in logical order. Arguments with
hidden characters or mixed-script words get a warning banner above them that
names each one and where it is. Beside the arguments: their exact byte length and
a short hash as stored (the decision records that hash; a change after display is
refused as stale). The arguments are rendered within budgets (`store.text.arguments`);
"Show all" loads the rest in slices on a zero-delay timer, so even a single 5 MB line
never freezes the window. The deadline leads the meta line so the countdown never
wraps out of sight.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from PySide6.QtCore import QEvent, QModelIndex, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QFontDatabase, QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from agentdesk.gui.shared.marks import MarkHighlighter
from agentdesk.gui.shared.palette import status_colour
from agentdesk.gui.shared.wrap_label import WrapAnywhereLabel
from agentdesk.model.approval_format import agent_label, format_left, local_time, project_label
from agentdesk.model.approvals.pending import PendingApprovalModel
from agentdesk.model.plain import shown_line, tooltip
from agentdesk.store import readmodel as rm
from agentdesk.store.text.arguments import Inspection, arguments_hash, byte_length, inspect_cached, short_hash
from agentdesk.store.text.render import Budget, render
from agentdesk.store.text.visible import visible

SLICE_MS = 12
"""How long one slice of "Show all" may hold the GUI thread."""
BATCH_LINES = 400


def plain_label(parent: QWidget, text: str = "") -> QLabel:
    """A label that never interprets agent text as HTML; selectable so ids can be copied."""
    label = QLabel(text, parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def title_text(approval: rm.Approval) -> str:
    return shown_line(f"{approval.tool_name} · {agent_label(approval)} · {project_label(approval)}", 300)


def deadline_text(approval: rm.Approval, seconds_left: float | None) -> str:
    if seconds_left is None:
        return "Never expires"
    if seconds_left <= 0:
        return f"Expired at {local_time(approval.expires_at)}"
    return f"Expires in {format_left(seconds_left)}"


def meta_text(approval: rm.Approval, seconds_left: float | None) -> str:
    if approval.status == rm.ApprovalStatus.PENDING:
        return (f"{deadline_text(approval, seconds_left)} · requested {local_time(approval.created_at)}"
                f" · {shown_line(approval.id)}")
    who = shown_line(approval.decider or "the runtime", 120)
    reason = f" — reason: {shown_line(approval.reason, 500)}" if approval.reason else ""
    status = str(approval.status).capitalize()
    return f"{status} by {who} at {local_time(approval.decided_at)} · {shown_line(approval.id)}{reason}"


def digest_text(approval: rm.Approval) -> str:
    """Byte length and short hash of the arguments exactly as stored: what the decision will record."""
    return (f"Arguments as stored: {byte_length(approval.arguments):,} bytes · "
            f"sha256 {short_hash(arguments_hash(approval.arguments))}")


def banner_text(inspection: Inspection) -> str:
    return visible(f"⚠ This call {inspection.sentence(limit=3)}. Approving it asks you to confirm.")


def banner_colours(palette: QPalette) -> QPalette:
    """The hidden-character warning's colours (shared with the Questions tab: one banner for agent text)."""
    light = palette.color(QPalette.ColorRole.Base).lightness() > 128
    failed = status_colour("failed")
    palette.setColor(QPalette.ColorRole.Window, failed.lighter(185) if light else failed.darker(250))
    palette.setColor(QPalette.ColorRole.WindowText, QColor("#5c0a0d") if light else QColor("#ffd7d7"))
    return palette


def argument_lines(approval: rm.Approval, budget: Budget) -> Iterator[str]:
    """The display lines of the pane: the arguments, or the edit then the original."""
    if not approval.edited_arguments:
        yield from render(approval.arguments, budget)
        return
    yield "Approved with edited arguments:"
    yield from render(approval.edited_arguments, budget)
    yield ""
    yield "Originally requested:"
    yield from render(approval.arguments, budget)


class SlicedLoader(QObject):
    """Appends lines from a generator to a plain-text editor a slice at a time (never freezing)."""

    progressed = Signal(int)
    finished = Signal()

    def __init__(self, edit: QPlainTextEdit) -> None:
        super().__init__(edit)
        self._edit = edit
        self._lines: Iterator[str] | None = None
        self._count = 0
        self._timer = QTimer(self)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._slice)

    @property
    def running(self) -> bool:
        return self._lines is not None

    def start(self, lines: Iterator[str]) -> None:
        self._edit.clear()
        self._lines, self._count = lines, 0
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        self._lines = None

    def _slice(self) -> None:
        if self._lines is None:
            return
        deadline = time.monotonic() + SLICE_MS / 1000
        batch: list[str] = []
        for line in self._lines:
            batch.append(line)
            if len(batch) >= BATCH_LINES or time.monotonic() >= deadline:
                break
        else:
            self.stop()
        if batch:
            self._edit.appendPlainText("\n".join(batch))
            self._count += len(batch)
        if self._lines is None:
            self.finished.emit()
        else:
            self.progressed.emit(self._count)


class ApprovalDetails(QWidget):
    """Title, meta line, warning banner, digest and arguments of the current approval."""

    approval_shown = Signal(str, str)
    """(approval id, run id) now shown; ("", "") when none. What the window's extras (notes) follow."""

    def __init__(self, pending: PendingApprovalModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._pending = pending
        self._approval: rm.Approval | None = None
        self._width = 0
        self._all = False
        """The operator asked for everything ("Show all"): a re-wrap keeps showing everything."""
        # agent text that may hold one very long word: it breaks inside the word rather than widen the pane
        self.title = WrapAnywhereLabel("", self)
        bold = QFont(self.title.font())
        bold.setBold(True)
        self.title.setFont(bold)
        self.meta = WrapAnywhereLabel("", self)
        self.banner = WrapAnywhereLabel("", self)
        self.banner.setAutoFillBackground(True)
        self.banner.setContentsMargins(6, 4, 6, 4)
        self.banner.hide()
        self.digest = plain_label(self)
        self.arguments = QPlainTextEdit(self)
        self.arguments.setReadOnly(True)
        self.arguments.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.arguments.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)  # lines wrap visibly, with ↪
        self.arguments.setPlaceholderText("Select an approval to see its arguments.")
        self.arguments.installEventFilter(self)
        self.arguments.viewport().installEventFilter(self)  # a scroll bar coming or going resizes only the viewport
        self.marks = MarkHighlighter(self.arguments.document(), self.arguments.palette())
        self.show_all_button = QPushButton("Show all", self)
        self.show_all_button.setToolTip("Load every value in full (in slices: the window stays responsive)")
        self.show_all_button.clicked.connect(self.show_all)
        self.show_all_button.hide()
        self.loading = plain_label(self)
        self.loader = SlicedLoader(self.arguments)
        self.loader.progressed.connect(lambda n: self.loading.setText(f"Loading… {n:,} lines"))
        self.loader.finished.connect(lambda: self.loading.setText("Showing everything."))
        self._rewrap = QTimer(self)
        self._rewrap.setSingleShot(True)
        self._rewrap.setInterval(150)
        self._rewrap.timeout.connect(self._rerender)
        pending.dataChanged.connect(self._on_data_changed)
        self._arrange()

    def _arrange(self) -> None:
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.title)
        box.addWidget(self.meta)
        box.addWidget(self.banner)
        self.extras = QVBoxLayout()
        """Sections the window adds under the banner (the notes and labels on the approval)."""
        self.extras.setContentsMargins(0, 0, 0, 0)
        box.addLayout(self.extras)
        row = QHBoxLayout()
        row.addWidget(self.digest, 1)
        row.addWidget(self.loading)
        row.addWidget(self.show_all_button)
        box.addLayout(row)
        box.addWidget(self.arguments, 1)

    # -- what is shown --------------------------------------------------------------------
    def show_approval(self, approval: rm.Approval | None) -> None:
        same = (approval is not None and self._approval is not None and approval.id == self._approval.id
                and approval.arguments == self._approval.arguments
                and approval.edited_arguments == self._approval.edited_arguments)
        self._approval = approval
        if not same:
            self.approval_shown.emit(approval.id if approval else "", approval.run_id if approval else "")
        if approval is None:
            self.loader.stop()
            for label in (self.title, self.meta, self.digest, self.loading):
                label.setText("")
            self.banner.hide()
            self.show_all_button.hide()
            self.arguments.setPlainText("")
            return
        self.title.setText(title_text(approval))
        self.refresh_meta(approval)
        self.digest.setText(digest_text(approval))
        self._show_banner(inspect_cached(approval.arguments))
        if not same:  # keeps the reader's scroll position (and a running "Show all") across updates
            self._all = False
            self._render()

    def shown_hash(self, approval_id: str) -> str | None:
        """The hash of the arguments this pane displays for `approval_id` (None when it shows another):
        what a decision on it must be checked against."""
        if self._approval is None or self._approval.id != approval_id:
            return None
        return arguments_hash(self._approval.arguments)

    def _on_data_changed(self, top_left: QModelIndex, bottom_right: QModelIndex, *_roles: object) -> None:
        """A row changed in the store (not a countdown tick): show what is stored now."""
        if self._approval is None or top_left.column() != 0:
            return
        row = self._pending.row_of(self._approval.id)
        if top_left.row() <= row <= bottom_right.row():
            self.show_approval(self._pending.approval_at(row))

    def _show_banner(self, inspection: Inspection) -> None:
        if not inspection.suspicious:
            self.banner.hide()
            return
        self.banner.setPalette(banner_colours(self.banner.palette()))
        self.banner.setText(banner_text(inspection))
        self.banner.setToolTip(tooltip(inspection.sentence(limit=40)))
        self.banner.show()

    def _chars_wide(self) -> int:
        """Characters that fit the pane's width (fractional advances and the document margin counted)."""
        advance = max(1.0, self.arguments.fontMetrics().horizontalAdvance("M" * 100) / 100)
        room = self.arguments.viewport().width() - 2 * self.arguments.document().documentMargin() - 4
        return max(16, int(room / advance) - 1)  # a floor wider than the pane would run text off its edge

    def _render(self) -> None:
        self.loader.stop()
        approval = self._approval
        if approval is None:
            return
        self._width = self._chars_wide()
        budget = Budget(width=self._width)
        self.arguments.setPlainText("\n".join(argument_lines(approval, budget)))
        self.show_all_button.setVisible(bool(budget.cut))
        self.show_all_button.setToolTip(
            tooltip("Not shown yet: " + "; ".join(dict.fromkeys(budget.cut))[:600]) if budget.cut else "")
        self.loading.setText("")

    def show_all(self) -> None:
        """Every value in full, appended slice by slice on the GUI thread's idle time."""
        if self._approval is None:
            return
        self._all = True
        self.show_all_button.hide()
        self.loading.setText("Loading…")
        self.loader.start(argument_lines(self._approval, Budget.unlimited(self._width or self._chars_wide())))

    def _rerender(self) -> None:
        if self._approval is None or self._chars_wide() == self._width or self.loader.running:
            return
        if self._all:
            self._width = self._chars_wide()
            self.show_all()
        else:
            self._render()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched in (self.arguments, self.arguments.viewport()) and event.type() == QEvent.Type.Resize:
            self._rewrap.start()
        return False

    def refresh_meta(self, approval: rm.Approval) -> None:
        left = self._pending.seconds_left(approval) if approval.status == rm.ApprovalStatus.PENDING else None
        self.meta.setText(meta_text(approval, left))
