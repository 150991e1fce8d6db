"""The timeline's find bar (Ctrl+F): a query over the run's spans, the match count, next and previous.

The query language is the store's (`store/search/query.py`: words, `kind:tool`,
`status:error`, `key:value`, `dur>2s`); the panel runs it on the runner and
reports back here. Enter or a pause in typing searches; F3 / Shift+F3 (or the
arrows) step through the matches; Escape closes the bar and clears them.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QToolButton, QWidget

from agentdesk.gui.shared.palette import ERROR_COLOUR

TYPING_PAUSE_MS = 350


class FindBar(QWidget):
    search = Signal(str)
    step = Signal(int)
    """+1 for the next match, -1 for the previous one."""
    closed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._pause = QTimer(self)
        self._pause.setSingleShot(True)
        self._pause.setInterval(TYPING_PAUSE_MS)
        self._pause.timeout.connect(self._search_now)
        self.edit = QLineEdit()
        self.edit.setPlaceholderText("Find spans: words, kind:tool, status:error, path:payments.py, dur>2s")
        self.edit.setClearButtonEnabled(True)
        self.edit.returnPressed.connect(self._search_now)
        self.edit.textEdited.connect(lambda _text: self._pause.start())
        self.edit.installEventFilter(self)
        self.count = QLabel(textFormat=Qt.TextFormat.PlainText)
        self.count.setMinimumWidth(140)
        previous, following, close = QToolButton(), QToolButton(), QToolButton()
        for button, text, tip in ((previous, "▲", "Previous match (Shift+F3)"), (following, "▼", "Next match (F3)"),
                                  (close, "✕", "Close (Escape)")):
            button.setText(text)
            button.setToolTip(tip)
            button.setAutoRaise(True)
        previous.clicked.connect(lambda: self.step.emit(-1))
        following.clicked.connect(lambda: self.step.emit(1))
        close.clicked.connect(self.close_bar)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Find:"))
        row.addWidget(self.edit, 1)
        row.addWidget(self.count)
        row.addWidget(previous)
        row.addWidget(following)
        row.addWidget(close)
        self._last = ""
        self.hide()

    def open_bar(self) -> None:
        self.show()
        self.edit.setFocus()
        self.edit.selectAll()

    def close_bar(self) -> None:
        self._pause.stop()
        self._last = ""
        self.hide()
        self.closed.emit()

    def _search_now(self) -> None:
        self._pause.stop()
        text = self.edit.text().strip()
        if text != self._last or not text:
            self._last = text
            self.search.emit(text)
        elif text:
            self.step.emit(1)  # Enter again: the next match

    def show_count(self, current: int, total: int, laid_out: int) -> None:
        """`current` is 0-based (-1: none chosen yet); `laid_out` may lag `total` while a run grows."""
        self.count.setStyleSheet("")
        if total == 0:
            self.count.setText("no matches")
        else:
            where = f"{current + 1:,} of " if current >= 0 else ""
            more = f" ({laid_out:,} shown)" if laid_out < total else ""
            self.count.setText(f"{where}{total:,} match{'' if total == 1 else 'es'}{more}")

    def show_message(self, text: str, error: bool = False) -> None:
        self.count.setStyleSheet(f"color: {ERROR_COLOUR};" if error else "")
        self.count.setText(text)
        self.count.setToolTip(text)

    key_help: tuple[tuple[str, str, str], ...] = (
        ("Timeline", "Esc (in the find bar)", "Close the find bar"),
    )
    """Keys the find bar handles itself (`eventFilter`), for the F1 sheet."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.edit and event.type() == QEvent.Type.KeyPress:
            assert isinstance(event, QKeyEvent)
            if event.key() == Qt.Key.Key_Escape:
                self.close_bar()
                return True
            if event.key() == Qt.Key.Key_F3:
                self.step.emit(-1 if event.modifiers() & Qt.KeyboardModifier.ShiftModifier else 1)
                return True
        return super().eventFilter(watched, event)
