"""Light and dark palettes on the Fusion style, so the app looks the same on every desktop."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleFactory, QStyleOption, QWidget

CHECKS = (QStyle.PrimitiveElement.PE_IndicatorItemViewItemCheck, QStyle.PrimitiveElement.PE_IndicatorCheckBox)


class OutlinedChecks(QProxyStyle):
    """Fusion outlines check boxes in a darker shade of the window colour: invisible on a dark
    background. Draw a visible outline on top, so an empty Visible/Locked box can still be seen."""

    def drawPrimitive(self, element: QStyle.PrimitiveElement, option: QStyleOption, painter: QPainter,
                      widget: QWidget | None = None) -> None:
        super().drawPrimitive(element, option, painter, widget)
        if element in CHECKS:
            painter.save()
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setPen(QColor("#9aa5b1"))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(option.rect.adjusted(1, 1, -2, -2), 2, 2)  # type: ignore[attr-defined]
            painter.restore()

DARK = {
    QPalette.ColorRole.Window: "#1f2227",
    QPalette.ColorRole.WindowText: "#e6e6e6",
    QPalette.ColorRole.Base: "#16181c",
    QPalette.ColorRole.AlternateBase: "#22262c",
    QPalette.ColorRole.ToolTipBase: "#2b3038",
    QPalette.ColorRole.ToolTipText: "#f0f0f0",
    QPalette.ColorRole.Text: "#e6e6e6",
    QPalette.ColorRole.Button: "#2a2e35",
    QPalette.ColorRole.ButtonText: "#e6e6e6",
    QPalette.ColorRole.BrightText: "#ff6b6b",
    QPalette.ColorRole.Highlight: "#2f6fd0",
    QPalette.ColorRole.HighlightedText: "#ffffff",
    QPalette.ColorRole.Link: "#6aa8ff",
    QPalette.ColorRole.PlaceholderText: "#8b949e",
}


def apply_theme(app: QApplication, theme: str) -> None:
    """`light`, `dark`, or `system` (keep the platform's palette)."""
    if theme == "dark":
        app.setStyle(OutlinedChecks(QStyleFactory.create("Fusion")))
        palette = QPalette()
        for role, colour in DARK.items():
            palette.setColor(role, QColor(colour))
        palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, QColor("#6b7280"))
        palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, QColor("#6b7280"))
        app.setPalette(palette)
    else:
        app.setStyle("Fusion")
    if theme == "light":
        app.setPalette(app.style().standardPalette())


def is_dark(app: QApplication) -> bool:
    return app.palette().color(QPalette.ColorRole.Window).lightness() < 128
