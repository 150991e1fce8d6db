"""The window's message bar: a failure the operator caused (opening a store, importing, a store call
that failed) stays in view above the views until dismissed, without a modal box in the way.

The status bar repeats it for a while; the bar keeps it, naming the path involved, so a failure is
never only a line in the terminal the window was started from.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QKeySequence, QPalette, QShortcut
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget

from agentdesk.gui.shared.palette import status_colour
from agentdesk.model.plain import shown_line

MAX_CHARS = 1_000


class MessageBar(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAutoFillBackground(True)
        self.label = QLabel(self)
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # paths and error sentences come from outside
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.close_button = QToolButton(self)
        self.close_button.setText("✕")
        self.close_button.setToolTip("Dismiss (Esc)")
        self.close_button.setAutoRaise(True)
        self.close_button.clicked.connect(self.dismiss)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 4, 4)
        row.addWidget(self.label, 1)
        row.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        escape = QShortcut(QKeySequence(Qt.Key.Key_Escape), self, context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
        escape.setWhatsThis("Message bar: Dismiss the message (when the bar has focus)")
        escape.activated.connect(self.dismiss)
        self.messages: list[str] = []
        """Everything shown since the last dismissal, oldest first."""
        self.hide()

    def show_error(self, text: str) -> None:
        text = shown_line(text, MAX_CHARS)
        self.messages.append(text)
        more = len(self.messages) - 1
        self.label.setText(text if not more else f"{text}  (and {more} earlier: see the tooltip)")
        self.label.setToolTip("\n".join(self.messages[-20:]) if more else "")
        self._colour()
        self.show()

    def dismiss(self) -> None:
        self.messages.clear()
        self.hide()

    def _colour(self) -> None:
        palette = self.palette()
        light = palette.color(QPalette.ColorRole.Base).lightness() > 128
        failed = status_colour("failed")
        palette.setColor(QPalette.ColorRole.Window, failed.lighter(185) if light else failed.darker(250))
        palette.setColor(QPalette.ColorRole.WindowText, QColor("#5c0a0d") if light else QColor("#ffd7d7"))
        self.setPalette(palette)
