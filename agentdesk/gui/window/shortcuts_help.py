"""A non-modal sheet of every keyboard shortcut, generated from the window itself so it cannot drift.

Three sources, read when the sheet opens:
- every QAction with a shortcut, in the menus (grouped by menu) and on the views (the context editor's);
- every QShortcut, described by its `whatsThis` ("Where: what it does");
- the keys views handle themselves (the timeline's F, End, P…), from the `key_help` table the view
  dispatches those keys with.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QMainWindow,
    QMenu,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

Row = tuple[str, str, str]
BUILT_IN: tuple[Row, ...] = (
    ("Tree", "Arrows, Enter, *", "Move, expand/collapse, expand everything below (as it loads)"),
    ("Dialogs", "Esc", "Close a dialog or secondary window (Cancel while an import runs)"),
)
"""Keys Qt's own widgets handle (no action or shortcut object to read them from)."""


def plain(text: str) -> str:
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&").strip()


def keys_of(sequences: Iterable[QKeySequence]) -> str:
    return " or ".join(s.toString(QKeySequence.SequenceFormat.NativeText) for s in sequences if not s.isEmpty())


def menu_rows(menu: QMenu, where: str) -> list[tuple[Row, QAction]]:
    rows: list[tuple[Row, QAction]] = []
    for action in menu.actions():
        if action.menu() is not None:
            rows += menu_rows(action.menu(), where)  # type: ignore[arg-type]
        elif keys := keys_of(action.shortcuts()):
            rows.append(((where, keys, plain(action.text())), action))
    return rows


def shortcut_rows(window: QMainWindow) -> list[Row]:
    """What the sheet lists, in order: menus, view actions, shortcuts, the views' own keys, Qt's keys."""
    rows: list[Row] = []
    seen: set[int] = set()
    for top in window.menuBar().actions():
        if top.menu() is not None:
            for row, action in menu_rows(top.menu(), plain(top.text())):  # type: ignore[arg-type]
                rows.append(row)
                seen.add(id(action))
    for action in window.findChildren(QAction):
        if id(action) not in seen and (keys := keys_of(action.shortcuts())):
            where = action.property("keys_where")
            rows.append((where if isinstance(where, str) else "Window", keys, plain(action.text())))
    for shortcut in window.findChildren(QShortcut):
        where, _, does = shortcut.whatsThis().partition(": ")
        if does and (keys := keys_of([shortcut.key()])):
            rows.append((where, keys, does))
    for widget in window.findChildren(QWidget):
        table = getattr(widget, "key_help", None)
        if isinstance(table, tuple):
            rows += [row for row in table if isinstance(row, tuple) and len(row) == 3]
    rows += BUILT_IN
    return list(dict.fromkeys(rows))


class ShortcutsDialog(QDialog):
    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self.setWindowTitle("Keyboard shortcuts")
        self.rows = shortcut_rows(window)
        table = QTableWidget(len(self.rows), 3, self)
        table.setHorizontalHeaderLabels(["Where", "Keys", "Does"])
        for row, values in enumerate(self.rows):
            for col, text in enumerate(values):
                item = QTableWidgetItem(text)
                item.setFlags(Qt.ItemFlag.ItemIsEnabled)
                item.setToolTip(text)
                table.setItem(row, col, item)
        table.setWordWrap(True)
        header = table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)  # "Does" takes the rest and wraps
        table.verticalHeader().hide()
        table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)  # follows the wrap
        self.table = table
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(table)
        layout.addWidget(buttons)
        screen = window.screen()
        room = screen.availableGeometry().size() if screen is not None else QSize(1920, 1080)
        self.resize(min(760, int(room.width() * 0.9)), min(640, int(room.height() * 0.85)))
