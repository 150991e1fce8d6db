"""The full text of the selected context row, below the tree.

Items can be megabytes of tool output, so only the first `DETAIL_CAP` characters
are put in the editor until the operator asks for all of it; the text is set
only when it changed, so a reload does not reset the operator's scroll position.
Agent text goes into a `QPlainTextEdit` and a plain-text label, never as markup.
"""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from agentdesk.gui.context.widgets import describe, plain_label
from agentdesk.gui.shared.marks import MarkHighlighter
from agentdesk.model.context.model import ContextModel
from agentdesk.model.context.tree import GroupRow, ItemRow, Row
from agentdesk.model.plain import shown_block, shown_line
from agentdesk.model.text import plural
from agentdesk.store.text.times import shown_time

DETAIL_CAP = 200_000


class DetailPane(QWidget):
    def __init__(self, model: ContextModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._model = model
        self._value: Row | None = None
        self._show_all: str | None = None
        """The id of the row shown uncapped (until another agent is shown)."""
        self._shown: tuple[str, int, int] | None = None
        self.title = plain_label()
        self.show_all_button = QPushButton()
        self.show_all_button.clicked.connect(self._on_show_all)
        self.show_all_button.hide()
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setPlaceholderText("Select an item to see its full content.")
        self.marks = MarkHighlighter(self.text.document(), self.text.palette())
        head = QHBoxLayout()
        head.addWidget(self.title, 1)
        head.addWidget(self.show_all_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(head)
        layout.addWidget(self.text, 1)

    def reset(self) -> None:
        self._show_all = None

    def show_row(self, value: Row | None) -> None:
        self._value = value
        if isinstance(value, ItemRow):
            self._show_text(value.item.id, item_title(value), value.item.content)
        elif isinstance(value, GroupRow):
            items = [i for i in (self._model.item(x) for x in self._model.group_item_ids(value.group.id)) if i]
            text = "\n\n".join(f"── {describe(i)} ──\n{i.content[:DETAIL_CAP]}" for i in items)
            title = f"{value.group.kind} group · {len(items)} items · {value.tokens:,} tokens"
            self._show_text(value.group.id, title, text)
        else:
            self._show_text("", "", "")

    def _show_text(self, key: str, title: str, text: str) -> None:
        full = key == self._show_all
        shown = text if full or len(text) <= DETAIL_CAP else text[:DETAIL_CAP]
        self.title.setText(shown_line(title, 300))
        if self._shown != (key, len(shown), hash(shown)):
            self.text.setPlainText(shown_block(shown))  # hidden characters as marks, lines kept
            self._shown = (key, len(shown), hash(shown))
        clipped = len(shown) < len(text)
        self.show_all_button.setVisible(clipped)
        if clipped:
            self.show_all_button.setText(f"Show all ({len(text):,} characters)")
            self.show_all_button.setToolTip(f"Only the first {DETAIL_CAP:,} characters are shown.")

    def _on_show_all(self) -> None:
        self._show_all = self._value.key[1] if self._value is not None else None
        self.show_row(self._value)


def item_title(row: ItemRow) -> str:
    item = row.item
    parts = [describe(item), f"revision {item.revision}", f"{item.token_estimate:,} tokens"]
    if row.replaces:
        parts.append(f"replaces {plural(row.replaces, 'item')}")
    if item.created_at is not None:
        parts.append(f"added {shown_time(item.created_at, '%Y-%m-%d %H:%M:%S')}")
    if row.covered:
        parts.append("replaced by a compaction (the model does not see it)")
    elif not item.visible:
        parts.append("hidden from the model")
    if item.locked:
        parts.append("locked")
    return " · ".join(parts)
