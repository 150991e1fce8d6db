"""The Questions tab of the approval queue: agents' questions, and the operator's answers.

A question is a second kind of queue entry beside approvals: the table lists the pending ones (question,
options, agent, run, time left), the pane below shows the selected one in full and takes the answer: type
it, or pick one of the options. The question is agent text: plain-text widgets only, every hidden character
shown as a mark (`visible`), and the same warning banner approval arguments get when it hides something.
Answering runs on the store runner (never the GUI thread), guarded by the revision shown; a refusal (already
answered by someone else, expired, a viewer's login) is shown in one sentence under the buttons.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from agentdesk.gui.approvals.details import banner_colours, plain_label
from agentdesk.gui.shared.flow import flow_of
from agentdesk.gui.shared.marks import MarkHighlighter
from agentdesk.gui.shared.wrap_label import WrapAnywhereLabel
from agentdesk.model.approval_format import local_time
from agentdesk.model.asks.model import AGENT, OPTIONS, QUESTION, RUN, AskModel
from agentdesk.model.plain import shown_line, tooltip
from agentdesk.model.services import Services
from agentdesk.store.asks.reads import Ask
from agentdesk.store.text.arguments import inspect_cached
from agentdesk.store.text.visible import visible

MAX_OPTION_BUTTONS = 12
COLUMN_SHARES = {QUESTION: 0.44, OPTIONS: 0.22, AGENT: 0.14}
"""Of the table's width; the time left takes the rest (the last section stretches)."""
ANSWER_TIP = "Send the typed answer to the agent (Ctrl+Enter)"


def question_banner(ask: Ask) -> str:
    inspection = inspect_cached(ask.question)
    return visible(f"⚠ This question {inspection.sentence(limit=3)}. Read it with the marks before you answer.")


class QuestionsPanel(QWidget):
    count_changed = Signal(int)
    reported = Signal(str)

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = AskModel(services, self)
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setMinimumSectionSize(24)
        header.setStretchLastSection(True)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.viewport().installEventFilter(self)
        self.table.setColumnHidden(RUN, True)  # the pane below names the run; the question needs the width
        self.empty = plain_label(self, self.model.why_none or "No questions waiting.")
        self.title = plain_label(self)
        self.meta = plain_label(self)
        self.banner = WrapAnywhereLabel("", self)
        self.banner.setAutoFillBackground(True)
        self.banner.setContentsMargins(6, 4, 6, 4)
        self.banner.hide()
        self.question = QPlainTextEdit(self)
        self.question.setReadOnly(True)
        self.question.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.marks = MarkHighlighter(self.question.document(), self.question.palette())
        self.options_label = QLabel("Pick an option:", self)
        self.option_buttons: list[QPushButton] = []
        self.options_box = QWidget(self)
        self.options_layout = QVBoxLayout(self.options_box)
        self.options_layout.setContentsMargins(0, 0, 0, 0)
        self.answer_edit = QPlainTextEdit(self)
        self.answer_edit.setPlaceholderText("Type an answer…")
        self.answer_edit.setTabChangesFocus(True)
        self.answer_edit.setMaximumHeight(90)
        self.answer_button = QPushButton("Answer  (Ctrl+Enter)", self)
        self.answer_button.setToolTip(ANSWER_TIP)
        self.result = plain_label(self)
        self._current: Ask | None = None
        self._wanted: str | None = None
        # A tab page lends its minimum size to every page of the queue's tabs: this one must not make the
        # approvals' pane taller or wider than it was (the dock would scroll); its splitter shares the room.
        self.setMinimumSize(1, 1)
        self._arrange()
        self._connect()
        self._show(None)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Columns share the table's width (the question most), so a narrow dock never scrolls sideways."""
        if watched is self.table.viewport() and event.type() == QEvent.Type.Resize:
            width = max(0, self.table.viewport().width())
            header = self.table.horizontalHeader()
            for column, share in COLUMN_SHARES.items():
                header.resizeSection(column, int(width * share))
        return super().eventFilter(watched, event)

    def hasHeightForWidth(self) -> bool:
        """No: its wrapping labels would make the whole queue's height depend on its width (a hidden tab too),
        and the dock's scroll area would then trade a scroll bar for width back and forth."""
        return False

    def _arrange(self) -> None:
        top = QWidget(self)
        top_box = QVBoxLayout(top)
        top_box.setContentsMargins(0, 0, 0, 0)
        top_box.addWidget(self.empty)
        top_box.addWidget(self.table, 1)
        detail = QWidget(self)
        box = QVBoxLayout(detail)
        box.setContentsMargins(0, 0, 0, 0)
        for widget in (self.title, self.meta, self.banner):
            box.addWidget(widget)
        box.addWidget(self.question, 1)
        box.addWidget(self.options_label)
        box.addWidget(self.options_box)
        box.addWidget(self.answer_edit)
        box.addLayout(flow_of(self.answer_button))
        box.addWidget(self.result)
        splitter = QSplitter(Qt.Orientation.Vertical, self)
        splitter.addWidget(top)
        splitter.addWidget(detail)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(splitter)

    def _connect(self) -> None:
        self.table.selectionModel().currentChanged.connect(lambda *_: self._on_selection())
        self.model.loaded.connect(self._on_loaded)
        self.model.answered.connect(self._on_answered)
        self.model.refused.connect(self._on_refused)
        self.answer_button.clicked.connect(self.answer_typed)
        self.answer_edit.textChanged.connect(self._update_actions)
        for keys in ("Ctrl+Return", "Ctrl+Enter"):
            shortcut = QShortcut(QKeySequence(keys), self, context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.setWhatsThis("Questions: send the typed answer")
            shortcut.activated.connect(self.answer_typed)

    # -- showing ----------------------------------------------------------------------------
    def current_ask(self) -> Ask | None:
        index = self.table.currentIndex()
        return self.model.ask_at(index.row()) if index.isValid() else None

    def select_ask(self, ask_id: str) -> None:
        """Select it now, or once it has loaded."""
        row = self.model.row_of(ask_id)
        self._wanted = None if row >= 0 else ask_id
        if row >= 0:
            self.table.setCurrentIndex(self.model.index(row, 0))

    def _on_loaded(self) -> None:
        count = self.model.pending
        self.empty.setVisible(count == 0)
        self.empty.setText(self.model.why_none or "No questions waiting.")
        wanted = self._wanted or (self._current.id if self._current is not None else None)
        self._wanted = None
        row = self.model.row_of(wanted) if wanted else -1
        if row < 0 and count:
            row = 0
        if row >= 0:
            self.table.setCurrentIndex(self.model.index(row, 0))
        self._show(self.model.ask_at(row) if row >= 0 else None)
        self.count_changed.emit(count)

    def _on_selection(self) -> None:
        self._show(self.current_ask())

    def _show(self, ask: Ask | None) -> None:
        changed = (ask.id if ask else None) != (self._current.id if self._current else None)
        self._current = ask
        if ask is None:
            for label in (self.title, self.meta):
                label.setText("")
            self.question.setPlainText("")
            self.banner.hide()
            self._set_options(())
            self._update_actions()
            return
        self.title.setText(shown_line(f"{ask.agent_name or ask.agent_id} asks · run {ask.run_id}", 300))
        deadline = "never expires" if ask.expires_at is None else f"expires {local_time(ask.expires_at)}"
        source = "" if ask.source == "agentdesk" else f" · {ask.source}"
        self.meta.setText(f"Asked {local_time(ask.created_at)} · {deadline} · {shown_line(ask.id)}{source}")
        self.question.setPlainText(visible(ask.question, lines=True))
        if inspect_cached(ask.question).suspicious:
            self.banner.setPalette(banner_colours(self.banner.palette()))
            self.banner.setText(question_banner(ask))
            self.banner.setToolTip(tooltip(inspect_cached(ask.question).sentence(limit=40)))
            self.banner.show()
        else:
            self.banner.hide()
        if changed:
            self._set_options(ask.options)
            self.answer_edit.clear()
            self.result.setText("")
        self._update_actions()

    def _set_options(self, options: tuple[str, ...]) -> None:
        for button in self.option_buttons:
            button.deleteLater()
        self.option_buttons = []
        for n, option in enumerate(options[:MAX_OPTION_BUTTONS], 1):
            button = QPushButton(f"{n}. {shown_line(option, 80)}", self.options_box)
            button.setToolTip(tooltip(f"Answer: {option}"))
            button.clicked.connect(lambda _=False, chosen=option: self.answer_with(chosen))
            self.options_layout.addWidget(button)
            self.option_buttons.append(button)
        self.options_label.setVisible(bool(options))
        self.options_box.setVisible(bool(options))

    def _update_actions(self) -> None:
        why = self.model.why_not_answer(self._current)
        typed = self.answer_edit.toPlainText().strip()
        self.answer_button.setEnabled(not why and bool(typed))
        self.answer_button.setToolTip(tooltip(why or ANSWER_TIP))
        self.answer_edit.setEnabled(not why)
        for button in self.option_buttons:
            button.setEnabled(not why)
        if why and self._current is not None and self._current.read_only:
            self.result.setText(f"Read-only: {why}")

    # -- answering --------------------------------------------------------------------------
    def answer_typed(self) -> None:
        text = self.answer_edit.toPlainText()
        if self.answer_button.isEnabled() and text.strip():
            self.answer_with(text)

    def answer_with(self, text: str) -> None:
        ask = self._current
        if ask is None or self.model.why_not_answer(ask):
            return
        self.answer_button.setEnabled(False)
        self.result.setText(f"Answering {ask.id}…")
        self.model.answer(ask, text)

    def _on_answered(self, ask: Ask) -> None:
        line = f"Answered {ask.id} as {shown_line(ask.answered_by, 60)}: {shown_line(ask.answer, 120)}"
        self.result.setText(line)
        self.reported.emit(line)

    def _on_refused(self, ask_id: str, reason: str) -> None:
        self.result.setText(f"Not answered: {shown_line(reason, 400)}")
        self._update_actions()

