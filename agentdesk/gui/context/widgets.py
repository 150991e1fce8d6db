"""The context editor's parts: its two dialogs, the message bar and the token gauge.

Both dialogs are opened with `open()` (never `exec()`) and capture the revision the
operator looked at when they opened, so a save can never silently overwrite a
newer version.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from agentdesk.gui.shared.palette import ERROR_COLOUR
from agentdesk.model.context.tree import KIND_LABELS, preview
from agentdesk.store import readmodel as rm
from agentdesk.store.text.visible import findings
from agentdesk.store.validation import estimate_tokens

WARN_FRACTION = 0.9
WARN_COLOUR = "#d08a00"


def plain_label(text: str = "", wrap: bool = True) -> QLabel:
    """A label that never interprets agent text as HTML."""
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(wrap)
    return label


def describe(item: rm.ContextItem) -> str:
    role = f" · {item.role}" if item.role else ""
    return f"{KIND_LABELS.get(item.kind, item.kind)}{role}"


class EditItemDialog(QDialog):
    """Plain-text editor for one item; `revision` is what the save is checked against."""

    def __init__(self, item: rm.ContextItem, context_revision: int, text: str | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.item_id, self.revision, self.context_revision = item.id, item.revision, context_revision
        self._before = item.token_estimate
        self.setWindowTitle("Edit context item")
        self.resize(720, 520)
        self.editor = QPlainTextEdit()
        self.editor.setPlainText(item.content if text is None else text)
        self.tokens = plain_label(wrap=False)
        self.hidden = plain_label()  # an editor shows hidden characters as themselves: say they are there
        self.editor.textChanged.connect(self._count)
        std = QDialogButtonBox.StandardButton
        buttons = QDialogButtonBox(std.Save | std.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.save_button = buttons.button(QDialogButtonBox.StandardButton.Save)
        layout = QVBoxLayout(self)
        layout.addWidget(plain_label(f"{describe(item)} · revision {item.revision}. The agent sees this text "
                                     "on its next model call."))
        layout.addWidget(self.editor, 1)
        layout.addWidget(self.hidden)
        layout.addWidget(self.tokens)
        layout.addWidget(buttons)
        self._count()

    def text(self) -> str:
        return self.editor.toPlainText()

    def _count(self) -> None:
        chars = max(0, self.editor.document().characterCount() - 1)
        after = -(-chars // 4)
        self.tokens.setText(f"About {after:,} tokens (was {self._before:,}).")
        found = findings(self.text()) if len(self.text()) <= 1_000_000 else []
        names = ", ".join(f"{f.name} at {f.position}" for f in found[:4]) + (" …" if len(found) > 4 else "")
        self.hidden.setText(f"⚠ The text contains {len(found):,} hidden characters: {names}. They are saved as "
                            "they are unless you delete them." if found else "")
        self.hidden.setVisible(bool(found))


class CompactDialog(QDialog):
    """Summary and focus for a compaction, with the token saving shown before confirming."""

    def __init__(self, items: Sequence[rm.ContextItem], context_revision: int,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.item_ids = [i.id for i in items]
        self.context_revision = context_revision
        self._before = sum(i.token_estimate for i in items)
        self.setWindowTitle("Compact context items")
        self.resize(640, 480)
        self.summary = QPlainTextEdit()
        self.summary.setPlaceholderText("What the agent should remember from these items…")
        self.focus_edit = QLineEdit()
        self.focus_edit.setPlaceholderText("Optional: what the summary concentrates on")
        self.saving = plain_label(wrap=False)
        font = self.saving.font()
        font.setBold(True)
        self.saving.setFont(font)
        listing = QPlainTextEdit("\n".join(f"{describe(i)}: {preview(i.content, 100)}" for i in items))
        listing.setReadOnly(True)
        listing.setMaximumHeight(110)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.compact_button: QPushButton = buttons.addButton("Compact",
                                                             QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout()
        form.addRow("Summary", self.summary)
        form.addRow("Focus", self.focus_edit)
        layout = QVBoxLayout(self)
        layout.addWidget(plain_label(f"These {len(items)} items are replaced by your summary; "
                                     "undo brings them back exactly."))
        layout.addWidget(listing)
        layout.addLayout(form, 1)
        layout.addWidget(self.saving)
        layout.addWidget(buttons)
        self.summary.textChanged.connect(self._update)
        self._update()

    def summary_text(self) -> str:
        return self.summary.toPlainText().strip()

    def focus_text(self) -> str:
        return self.focus_edit.text().strip()

    def saving_text(self) -> str:
        after = estimate_tokens(self.summary_text())
        count = len(self.item_ids)
        noun = "item" if count == 1 else "items"
        change = (f"saves {self._before - after:,}" if after <= self._before
                  else f"adds {after - self._before:,} (longer than the items it replaces)")
        return f"{count} {noun}, {self._before:,} tokens → {after:,} tokens, {change}"

    def _update(self) -> None:
        self.saving.setText(self.saving_text())
        self.compact_button.setEnabled(bool(self.summary_text()))


class MessageBar(QFrame):
    """A non-modal strip for conflicts and refusals, with an optional follow-up action."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("contextMessageBar")
        self.setStyleSheet("#contextMessageBar { background: rgba(229, 72, 77, 38); "
                           "border: 1px solid #e5484d; border-radius: 4px; }")
        self.label = plain_label()
        self.action_button = QPushButton()
        self.action_button.clicked.connect(self._run_action)
        close = QPushButton("Dismiss")
        close.clicked.connect(self.clear)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 4, 4)
        row.addWidget(self.label, 1)
        row.addWidget(self.action_button)
        row.addWidget(close)
        self._action: Callable[[], None] | None = None
        self.hide()

    def show_message(self, text: str, action_text: str | None = None,
                     action: Callable[[], None] | None = None) -> None:
        self.label.setText(text)
        self._action = action
        self.action_button.setText(action_text or "")
        self.action_button.setVisible(action is not None)
        self.show()

    def text(self) -> str:
        return "" if self.isHidden() else self.label.text()

    def clear(self) -> None:
        self._action = None
        self.hide()

    def _run_action(self) -> None:
        action, self._action = self._action, None
        self.hide()
        if action is not None:
            action()


class TokenGauge(QProgressBar):
    """Visible tokens against the agent's budget; amber above 90 %, red over budget."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumWidth(240)
        self.setTextVisible(True)
        self.setToolTip("Tokens the model sees on its next call (estimate: about four characters a token) "
                        "against the agent's context budget.")
        self._default = self.palette().color(QPalette.ColorRole.Highlight)

    def set_tokens(self, used: int, budget: int) -> None:
        self.setRange(0, max(budget, 1))
        self.setValue(min(used, max(budget, 1)))
        if budget <= 0:
            self.setFormat(f"{used:,} tokens (no budget set)")
            self._colour(self._default)
            return
        share = used / budget
        self.setFormat(f"{used:,} / {budget:,} tokens ({share:.0%})")
        self._colour(QColor(ERROR_COLOUR if share > 1 else WARN_COLOUR if share > WARN_FRACTION
                            else self._default))

    def _colour(self, colour: QColor) -> None:
        palette = self.palette()
        palette.setColor(QPalette.ColorRole.Highlight, colour)
        self.setPalette(palette)
