"""Everything about one span: numbers, error, attributes, input and output, and what a model call saw.

Agent text is data: every field is plain text (labels with PlainText format,
read-only QPlainTextEdit), JSON is pretty-printed off the GUI thread, and very
large texts show their first 200 KB until the operator asks for all of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from agentdesk.gui.shared.flow import FlowLayout, HeightForWidth
from agentdesk.gui.shared.marks import MarkHighlighter
from agentdesk.gui.shared.palette import ERROR_COLOUR, status_colour
from agentdesk.gui.timeline.drawing import one_line
from agentdesk.model.plain import shown_block, shown_line
from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask
from agentdesk.store import readmodel as rm
from agentdesk.store.ingest.prices import ESTIMATED_KEY
from agentdesk.store.source import Source
from agentdesk.store.text.durations import format_duration
from agentdesk.store.text.times import UNREADABLE_TIME_TEXT, is_unreadable

SHOWN_CHARS = 200_000
PRETTY_LIMIT = 20_000_000
"""Bigger JSON is shown as it came: pretty-printing it would cost more than it helps."""
PREVIEW_CHARS = 160
ERROR_TAB, SENT_TAB = 2, 4


def pretty(text: str | None) -> str:
    """JSON pretty-printed when it parses, anything else unchanged."""
    if not text:
        return ""
    head = text.lstrip()[:1]
    if head in ("{", "[") and len(text) <= PRETTY_LIMIT:
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):  # nested too deep to reprint: shown as it came
            pass
    return text


@dataclass(frozen=True, slots=True)
class SpanView:
    """A span prepared for display (formatting done on a worker thread)."""

    span: rm.Span
    attributes: str
    input_text: str
    output_text: str
    sent: tuple[rm.SentItem, ...]
    decisions: str = ""
    """Who decided the approvals asked from this span (the signed login, the typed name beside it)."""


def decisions_text(approvals: list[rm.Approval]) -> str:
    """"approved by bob (typed: alice)", one per approval asked from the span; plain text, one line."""
    shown = [f"{a.status} by {a.decider}" if a.decider else str(a.status) for a in approvals]
    return shown_line("; ".join(shown), 300)


def load_span_view(source: Source, span_id: str) -> SpanView:
    span = source.span(span_id)
    sent = tuple(source.sent_context(span_id)) if span.kind == "model" else ()
    finder = getattr(source, "span_decisions", None)  # the native store's; foreign sources have none
    decisions = decisions_text(finder(span_id)) if callable(finder) else ""
    try:
        attributes = (json.dumps(span.attributes, indent=2, ensure_ascii=False, default=str)
                      if span.attributes else "")
    except RecursionError:
        attributes = repr(span.attributes)[:1_000_000]
    return SpanView(span, attributes, pretty(span.input_text), pretty(span.output_text), sent, decisions)


class TextBlock(QWidget):
    """Read-only plain text that shows the first 200 KB of huge values, with a button for the rest."""

    def __init__(self, placeholder: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.edit = QPlainTextEdit(readOnly=True)
        self.edit.setPlaceholderText(placeholder)
        self.edit.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.marks = MarkHighlighter(self.edit.document(), self.edit.palette())
        self.note = QLabel(textFormat=Qt.TextFormat.PlainText)
        self.show_all = QPushButton("Show all")
        self.show_all.clicked.connect(self._show_all)
        bar = QHBoxLayout()
        bar.addWidget(self.note, 1)
        bar.addWidget(self.show_all)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit)
        layout.addLayout(bar)
        self._full = ""
        self.set_text("")

    def set_text(self, text: str) -> None:
        self._full = text
        cut = len(text) > SHOWN_CHARS
        self.edit.setPlainText(shown_block(text[:SHOWN_CHARS] if cut else text))  # hidden characters marked
        self.note.setText(f"Showing the first {_size(SHOWN_CHARS)} of {_size(len(text))}." if cut else "")
        self.note.setVisible(cut)
        self.show_all.setVisible(cut)

    @property
    def shown_text(self) -> str:
        return self.edit.toPlainText()

    def _show_all(self) -> None:
        self.edit.setPlainText(shown_block(self._full))
        self.note.setVisible(False)
        self.show_all.setVisible(False)


def _size(chars: int) -> str:
    return f"{chars / 1_000_000:.1f} MB" if chars >= 1_000_000 else f"{chars / 1000:.0f} KB"


class SentList(QWidget):
    """The items a model call was sent, in order; selecting one shows its full text."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QLabel(textFormat=Qt.TextFormat.PlainText)
        self.items = QListWidget()
        self.content = TextBlock("Select an item to read it in full.")
        self.items.currentRowChanged.connect(self._show)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.items)
        split.addWidget(self.content)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.summary)
        layout.addWidget(split, 1)
        self._sent: tuple[rm.SentItem, ...] = ()

    def set_items(self, sent: tuple[rm.SentItem, ...], revision: int | None) -> None:
        self._sent = sent
        self.items.clear()
        for n, item in enumerate(sent, 1):
            preview = shown_line(item.content[:PREVIEW_CHARS])
            self.items.addItem(QListWidgetItem(shown_line(f"{n}. {item.role or '-'} · {item.kind} — {preview}")))
        at = f" at context revision {revision}" if revision is not None else ""
        self.summary.setText(f"What the model saw: {len(sent)} items{at}." if sent
                             else "No context was recorded for this call.")
        self.content.set_text("")

    def _show(self, row: int) -> None:
        self.content.set_text(self._sent[row].content if 0 <= row < len(self._sent) else "")


class SpanDetails(QWidget):
    """The details pane; `show_span(id)` loads through the store runner, `set_view` shows a loaded span."""

    filled = Signal(bool)
    """Whether a span is shown (False: only the "click a span" line, the pane can fold to it)."""
    span_shown = Signal(str, str)
    """(span id, run id) of the span now shown; ("", "") when cleared. What the window's extras follow."""

    def __init__(self, services: Services | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self._latest = None if services is None else LatestTask(
            services.runner, on_error=lambda exc: self.clear(f"Could not load the span: {exc}"))
        self.span_id: str | None = None
        self.view: SpanView | None = None
        self._build()
        self.clear()

    def _build(self) -> None:
        self.title = _label(bold=True)
        self.subtitle = _label()
        self.error = _label()
        self.error.setStyleSheet(f"color: {ERROR_COLOUR}; font-weight: bold;")
        self.facts = {name: _label() for name in ("Duration", "Started", "Tokens", "Cost", "Decided", "Id")}
        # The facts side by side, wrapping when narrow: as a form of five rows they took the height the
        # output and the model's context need.
        facts = QWidget()
        flow = FlowLayout(facts, spacing=14)
        for name, label in self.facts.items():
            label.setWordWrap(False)
            pair = QWidget(facts)
            row = QHBoxLayout(pair)
            row.setContentsMargins(0, 0, 0, 0)
            row.setSpacing(6)
            heading = QLabel(name, pair)
            heading.setEnabled(False)  # the palette's muted text: the value reads first
            row.addWidget(heading)
            row.addWidget(label)
            flow.addWidget(pair)
        HeightForWidth(facts)
        self.output = TextBlock("No output.")
        self.input = TextBlock("No input.")
        self.error_text = TextBlock("No error.")
        self.attributes = TextBlock("No attributes.")
        self.sent = SentList()
        self.tabs = QTabWidget()
        pages: tuple[tuple[QWidget, str], ...] = (
            (self.output, "Output"), (self.input, "Input"), (self.error_text, "Error"),
            (self.attributes, "Attributes"), (self.sent, "Model saw"))
        for page, name in pages:
            self.tabs.addTab(page, name)
        # the texts get at least ten lines; the scroll area around the pane scrolls the rest into view
        self.tabs.setMinimumHeight(self.fontMetrics().lineSpacing() * 10 + self.tabs.tabBar().sizeHint().height())
        layout = QVBoxLayout(self)
        for label in (self.title, self.subtitle, self.error):
            layout.addWidget(label)
        layout.addWidget(facts)
        self.extras = QVBoxLayout()
        """Sections the window adds under the facts (the notes and labels on the span)."""
        self.extras.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(self.extras)
        layout.addWidget(self.tabs, 1)
        self.facts_row = facts

    def clear(self, message: str = "Click a span to see its details.") -> None:
        self.span_id, self.view = None, None
        self.title.setText(shown_line(message, 500))
        for label in (self.subtitle, self.error, *self.facts.values()):
            label.setText("")
        self.error.setVisible(False)
        for block in (self.output, self.input, self.error_text, self.attributes):
            block.set_text("")
        self.sent.set_items((), None)
        self.tabs.setTabEnabled(ERROR_TAB, False)
        self.tabs.setTabEnabled(SENT_TAB, False)
        self._fill(False)
        self.span_shown.emit("", "")

    def _fill(self, shown: bool) -> None:
        """Facts and texts only with a span: empty, the pane is one line and folds to it."""
        self.facts_row.setVisible(shown)
        self.tabs.setVisible(shown)
        self.filled.emit(shown)

    def show_span(self, span_id: str | None) -> None:
        """Load and show a span (None clears); a newer request supersedes an older one."""
        if span_id is None or self.services is None or self._latest is None:
            if self._latest is not None:
                self._latest.cancel()
            self.clear()
            return
        self.span_id = span_id
        self._latest.start(self._load(self.services, span_id))

    async def _load(self, services: Services, span_id: str) -> None:
        self.set_view(await services.runner.run(load_span_view, services.source, span_id))

    def set_view(self, view: SpanView) -> None:
        span = view.span
        self.span_id, self.view = span.id, view
        self._fill(True)
        self.title.setText(one_line(span.name, 300))
        self.subtitle.setText(shown_line(f"{span.kind} · {span.status}", 200))
        self.subtitle.setStyleSheet(f"color: {status_colour(span.status).name()};")
        failed = span.status == "error" or bool(span.error)
        error = span.error or "no error message was recorded"
        self.error.setText(f"✖ Failed: {one_line(error, 300)}" if failed else "")
        self.error.setVisible(failed)
        self._facts(span)
        self.span_shown.emit(span.id, span.run_id)
        self.facts["Decided"].setText(view.decisions or "—")
        self.output.set_text(view.output_text)
        self.input.set_text(view.input_text)
        self.error_text.set_text(span.error or "")
        self.attributes.set_text(view.attributes)
        self.sent.set_items(view.sent, span.context_revision)
        self.tabs.setTabEnabled(ERROR_TAB, bool(span.error))
        self.tabs.setTabEnabled(SENT_TAB, span.kind == "model")
        if span.error:
            self.tabs.setCurrentIndex(ERROR_TAB)
        elif not self.tabs.isTabEnabled(self.tabs.currentIndex()):
            self.tabs.setCurrentIndex(0)

    def _facts(self, span: rm.Span) -> None:
        self.facts["Duration"].setText(_duration(span))
        self.facts["Started"].setText(UNREADABLE_TIME_TEXT if is_unreadable(span.started_at) else
                                      span.started_at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC")
        usage = span.usage
        self.facts["Tokens"].setText(f"{usage.input_tokens:,} in · {usage.output_tokens:,} out")
        estimated = (span.attributes or {}).get(ESTIMATED_KEY)
        self.facts["Cost"].setText(f"${usage.cost_usd:,.4f}" + (" (estimated)" if estimated else ""))
        self.facts["Cost"].setToolTip(f"Estimated from the price table {estimated}: the agent reported no cost"
                                      if estimated else "")
        self.facts["Id"].setText(shown_line(span.id))


def _duration(span: rm.Span) -> str:
    attributes = span.attributes or {}
    if span.duration_s == 0 and (attributes.get("milestone") or attributes.get("point_event")):
        return "none: a milestone" if attributes.get("milestone") else "none: a point event"
    return format_duration(span.duration_s) if span.duration_s is not None else "still running"


def _label(bold: bool = False) -> QLabel:
    label = QLabel(textFormat=Qt.TextFormat.PlainText, wordWrap=True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if bold:
        font: Any = QFont(label.font())
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.15)
        label.setFont(font)
    return label
