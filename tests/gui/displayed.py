"""What Qt actually shows for a tooltip or label string: the test oracle for plain agent text."""

from __future__ import annotations

from PySide6.QtCore import QPoint
from PySide6.QtGui import Qt, QTextDocument  # QtGui's Qt has mightBeRichText
from PySide6.QtWidgets import QApplication, QLabel, QToolTip, QWidget


def displayed(text: str) -> str:
    """The characters Qt would draw: the string itself when Qt takes it for plain text, else what its
    HTML parser makes of it (entities decoded, markup gone)."""
    if not Qt.mightBeRichText(text):
        return text
    document = QTextDocument()
    document.setHtml(text)
    return document.toPlainText()


def shown_tooltip(widget: QWidget, text: str) -> str:
    """Pop the tooltip up for real and read Qt's own tooltip label: what the operator would see."""
    QToolTip.showText(QPoint(10, 10), text, widget)
    QApplication.processEvents()
    label = next(w for w in QApplication.topLevelWidgets() if w.objectName() == "qtooltip_label")
    assert isinstance(label, QLabel) and label.textFormat() == Qt.TextFormat.AutoText
    seen = displayed(label.text())
    QToolTip.hideText()
    return seen
