"""Colours and symbols shared by every view, chosen to read in light and dark palettes."""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette

SPAN_KIND_COLOURS: dict[str, str] = {
    "agent": "#5b8def",
    "sub_agent": "#8e6bd8",
    "model": "#2fa38b",
    "tool": "#e0a030",
    "guardrail": "#c75fa8",
    "gate": "#7a8899",
    "internal": "#9aa5b1",
}
ERROR_COLOUR = "#e5484d"
RUNNING_COLOUR = "#3aa0ff"

STATUS_COLOURS: dict[str, str] = {
    "running": "#3aa0ff",
    "waiting": "#f0a020",
    "failed": "#e5484d",
    "error": "#e5484d",
    "done": "#30a46c",
    "ok": "#30a46c",
    "idle": "#8b949e",
    "pending": "#f0a020",
    "cancelled": "#8b949e",
    "approved": "#30a46c",
    "denied": "#e5484d",
    "expired": "#8b949e",
    "withdrawn": "#8b949e",
}

STATUS_SYMBOLS: dict[str, str] = {
    "running": "▶",
    "waiting": "⏸",
    "failed": "✖",
    "done": "✔",
    "idle": "○",
    "cancelled": "⊘",
    "pending": "…",
}


def kind_colour(kind: str) -> QColor:
    return QColor(SPAN_KIND_COLOURS.get(kind, SPAN_KIND_COLOURS["internal"]))


def status_colour(status: str) -> QColor:
    return QColor(STATUS_COLOURS.get(status, STATUS_COLOURS["idle"]))


def readable(colour: QColor, palette: QPalette) -> QColor:
    """Status colours are mid-tones: darken them a little on light backgrounds so text stays legible."""
    return colour.darker(135) if palette.color(QPalette.ColorRole.Base).lightness() > 128 else colour
