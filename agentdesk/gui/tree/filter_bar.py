"""The row above the project tree: filter by name, by status, and "pending only".

Only widgets: it says what the operator asked for (`changed`) and the tree
decides how to show it. Ctrl+F (while the tree has focus) jumps here; Esc in
the text box clears it and hands focus back.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLineEdit, QToolButton, QWidget

from agentdesk.gui.tree.delegate import status_symbol
from agentdesk.model.tree.filter import TreeFilterProxy

STATUSES = ("running", "waiting", "failed", "done", "idle", "cancelled", "pending")


class TreeFilterBar(QWidget):
    changed = Signal()
    """Any of the three filters changed (not sent by `clear`)."""
    left = Signal()
    """The operator pressed Esc in the text box or Enter: the tree should take the focus."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.filter_edit = QLineEdit(self)
        self.filter_edit.setPlaceholderText("Filter by name  (Ctrl+F)")
        self.filter_edit.setClearButtonEnabled(True)
        self.status_combo = QComboBox(self)
        self.status_combo.addItem("All statuses", "")
        for status in STATUSES:
            self.status_combo.addItem(f"{status_symbol(status, self.fontMetrics())} {status}", status)
        self.status_combo.setToolTip("Show only rows with this status (and the rows above them)")
        self.pending_button = QToolButton(self)
        self.pending_button.setText("Pending only")
        self.pending_button.setCheckable(True)
        self.pending_button.setToolTip("Show only rows with approvals waiting for a decision")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.filter_edit, 1)
        row.addWidget(self.status_combo)
        row.addWidget(self.pending_button)
        self.filter_edit.textChanged.connect(self.changed)
        self.status_combo.currentIndexChanged.connect(self.changed)
        self.pending_button.toggled.connect(self.changed)
        self.filter_edit.returnPressed.connect(self.left)
        clear = QShortcut(QKeySequence(Qt.Key.Key_Escape), self.filter_edit,
                          context=Qt.ShortcutContext.WidgetShortcut)
        clear.setWhatsThis("Tree: In the filter box, clear the filter (again: back to the tree)")
        clear.activated.connect(self._escape)

    def focus(self) -> None:
        self.filter_edit.setFocus()
        self.filter_edit.selectAll()

    def apply_to(self, proxy: TreeFilterProxy) -> None:
        """Give the proxy what the widgets say, as one filter change."""
        proxy.set_filters(self.filter_edit.text(), self.status_combo.currentData() or "",
                          self.pending_button.isChecked())

    def clear(self) -> None:
        """Reset the widgets without sending `changed`."""
        for widget in (self.filter_edit, self.status_combo, self.pending_button):
            widget.blockSignals(True)
        self.filter_edit.clear()
        self.status_combo.setCurrentIndex(0)
        self.pending_button.setChecked(False)
        for widget in (self.filter_edit, self.status_combo, self.pending_button):
            widget.blockSignals(False)

    def _escape(self) -> None:
        self.filter_edit.clear()
        self.left.emit()
