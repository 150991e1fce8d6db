"""The "Send a message" dialog: plain text for one agent, queued until its next model call.

The text is the operator's, but it becomes what the model reads: hidden characters are named under the editor
(as the context editor's Edit does) so a pasted zero-width or bidi character is not sent unseen, and more than
1 MB is refused before anything is sent.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from agentdesk.model.plain import shown_line
from agentdesk.model.text import plural
from agentdesk.store.messages.commands import MAX_MESSAGE_BYTES
from agentdesk.store.text.visible import findings

SHOWN_FINDINGS = 4


def _label(text: str = "", *, bold: bool = False) -> QLabel:
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)  # agent and operator text is never rich text
    label.setWordWrap(True)
    if bold:
        font = label.font()
        font.setBold(True)
        label.setFont(font)
    return label


class SendMessageDialog(QDialog):
    """`text()` once accepted; the caller sends it on the runner."""

    def __init__(self, agent_id: str, agent_name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.agent_id = agent_id
        name = shown_line(agent_name or agent_id, 120)
        self.setWindowTitle(f"Send a message to {name}")
        self.resize(640, 420)
        self.title = _label(f"Message to {name}", bold=True)
        self.note = _label(f"Queued now; {name} reads it at its next model call, as a user message from you. "
                           "Until then you can cancel it in the context editor.")
        self.editor = QPlainTextEdit()
        self.editor.setPlaceholderText("A hint, a correction, or what to do next…")
        self.warning = _label()
        self.warning.setObjectName("messageWarning")
        self.warning.setStyleSheet("#messageWarning { background: rgba(240, 160, 32, 60); padding: 4px 8px; "
                                   "border-radius: 4px; }")
        self.size_label = _label()
        std = QDialogButtonBox.StandardButton
        self.buttons = QDialogButtonBox(std.Cancel)
        self.send_button = self.buttons.addButton("Send", QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.note)
        layout.addWidget(self.editor, 1)
        layout.addWidget(self.warning)
        layout.addWidget(self.size_label)
        layout.addWidget(self.buttons)
        self.editor.textChanged.connect(self._check)
        self._check()
        self.editor.setFocus()

    def text(self) -> str:
        return self.editor.toPlainText()

    def _check(self) -> None:
        text = self.text()
        size = len(text.encode("utf-8", "surrogatepass"))
        too_big = size > MAX_MESSAGE_BYTES
        found = findings(text) if not too_big else []
        if too_big:
            self.warning.setText(f"The message is {size:,} bytes; the limit is {MAX_MESSAGE_BYTES:,} (1 MB).")
        elif found:
            names = ", ".join(f"{f.name} at {f.position}" for f in found[:SHOWN_FINDINGS])
            more = " …" if len(found) > SHOWN_FINDINGS else ""
            self.warning.setText(f"⚠ The message contains {plural(len(found), 'hidden character')}: {names}{more}. "
                                 "They are sent as they are unless you delete them.")
        self.warning.setVisible(too_big or bool(found))
        self.size_label.setText(f"{size:,} bytes · about {-(-len(text) // 4):,} tokens")
        self.send_button.setEnabled(bool(text.strip()) and not too_big)
