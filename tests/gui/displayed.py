"""What Qt actually shows for a tooltip or label string: the test oracle for plain agent text."""

from __future__ import annotations

from PySide6.QtGui import (
    Qt,  # QtGui adds mightBeRichText to the Qt namespace
    QTextDocument,
)


def displayed(text: str) -> str:
    """The characters Qt would draw: the string itself when Qt takes it for plain text, else what its
    HTML parser makes of it (entities decoded, markup gone)."""
    if not Qt.mightBeRichText(text):
        return text
    document = QTextDocument()
    document.setHtml(text)
    return document.toPlainText()
