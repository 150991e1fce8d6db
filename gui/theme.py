"""Light and dark palettes on the Fusion style, so the app looks the same on every desktop."""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

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
    app.setStyle("Fusion")
    if theme == "dark":
        palette = QPalette()
        for role, colour in DARK.items():
            palette.setColor(role, QColor(colour))
        palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, QColor("#6b7280"))
        palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, QColor("#6b7280"))
        app.setPalette(palette)
    elif theme == "light":
        app.setPalette(app.style().standardPalette())


def is_dark(app: QApplication) -> bool:
    return app.palette().color(QPalette.ColorRole.Window).lightness() < 128
