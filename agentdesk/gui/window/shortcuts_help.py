"""A non-modal sheet of every keyboard shortcut: the app is meant to be driven from the keyboard."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

SHORTCUTS: tuple[tuple[str, str, str], ...] = (
    ("Window", "Ctrl+1 / Ctrl+2 / Ctrl+3 / Ctrl+4 / Ctrl+5",
     "Focus tree / timeline / context / approval queue / rules"),
    ("Window", "Ctrl+R", "A rule from the selected approval (the narrowest; check its dry run, then save)"),
    ("Window", "Ctrl+Shift+F", "Search spans, approvals and context items of every run"),
    ("Window", "Ctrl+Shift+D", "Compare the shown run with another (added, removed, slower, faster)"),
    ("Window", "Ctrl+Shift+R", "Reset the dock layout"),
    ("Window", "Ctrl+Shift+N", "Set the operator name recorded with decisions"),
    ("Window", "F1", "This list"),
    ("Tree", "Arrows, Enter, * ", "Move, expand/collapse, expand all below"),
    ("Tree", "Ctrl+F", "Filter by name"),
    ("Approvals", "A", "Approve the selected approval(s)"),
    ("Approvals", "D", "Deny (asks for a reason)"),
    ("Approvals", "E", "Edit arguments, then approve"),
    ("Approvals", "T / C", "Show in timeline / show context"),
    ("Timeline", "F", "Fit the whole run"),
    ("Timeline", "+ / -", "Zoom in / out (wheel zooms, drag pans)"),
    ("Context", "Space / L", "Toggle visible (whole turn group) / locked"),
    ("Context", "Enter or F2", "Edit the item's content"),
    ("Context", "Ctrl+K / Ctrl+Z", "Compact selected items / undo a compaction"),
)


class ShortcutsDialog(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        table = QTableWidget(len(SHORTCUTS), 3, self)
        table.setHorizontalHeaderLabels(["Where", "Keys", "Does"])
        for row, values in enumerate(SHORTCUTS):
            for col, text in enumerate(values):
                item = QTableWidgetItem(text)
                item.setFlags(Qt.ItemFlag.ItemIsEnabled)
                table.setItem(row, col, item)
        table.resizeColumnsToContents()
        table.verticalHeader().hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(table)
        layout.addWidget(buttons)
        self.resize(620, 460)
