"""Marks for hidden characters stand out: a highlighter for plain-text panes that show agent text.

`visible` replaces hidden characters by marks like `⟨U+202E⟩`, and marks literal
mark brackets in agent text too, so every `⟨…⟩` span in a pane is ours. In some
monospace fonts the brackets look like parentheses; a tinted background keeps a
mark from passing for text the agent wrote ("(U+202E)" typed by an agent stays plain).
"""

from __future__ import annotations

import re

from PySide6.QtGui import QColor, QPalette, QSyntaxHighlighter, QTextCharFormat, QTextDocument

MARK = re.compile("⟨[^⟨⟩]{1,80}⟩")


class MarkHighlighter(QSyntaxHighlighter):
    """Tints every mark in a document; only blocks that change are re-scanned."""

    def __init__(self, document: QTextDocument, palette: QPalette) -> None:
        super().__init__(document)
        self.mark_format = QTextCharFormat()
        dark = palette.color(QPalette.ColorRole.Base).lightness() < 128
        self.mark_format.setBackground(QColor("#6b4e00") if dark else QColor("#ffe08a"))
        self.mark_format.setForeground(QColor("#fff3cf") if dark else QColor("#3d2a00"))

    def highlightBlock(self, text: str) -> None:
        if "⟨" not in text:
            return
        for match in MARK.finditer(text):
            self.setFormat(match.start(), match.end() - match.start(), self.mark_format)
