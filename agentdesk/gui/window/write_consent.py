"""Asking the operator, once per database, before agentdesk writes into another runtime's store.

Writing to a lensagent, stageflow, vgxness or maka database bypasses that
runtime's own code; the operator must say yes knowingly, with the source's own
caveats in front of them. The answer is remembered per file.
"""

from __future__ import annotations

import hashlib

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from agentdesk.gui.window.settings import open_settings
from agentdesk.model.plain import shown_block, shown_line
from agentdesk.store.source import SourceDescriptor


def _key(location: str) -> str:
    return "foreign_writes/" + hashlib.sha256(location.encode()).hexdigest()[:16]


def writes_confirmed(descriptor: SourceDescriptor) -> bool:
    return bool(open_settings().value(_key(descriptor.location), False, type=bool))


def ask_for_writes(descriptor: SourceDescriptor) -> bool:
    """A modal question asked before the event loop starts (never from a coroutine)."""
    box = QMessageBox()
    box.setIcon(QMessageBox.Icon.Warning)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setWindowTitle("Allow writes?")
    box.setText(f"This is a {shown_line(descriptor.kind)} database:\n{shown_line(descriptor.location)}\n\n"
                "Allow agentdesk to write to it (approve, deny, answer questions and edit where its schema allows)?")
    box.setInformativeText(shown_block(descriptor.notes) or "Writes follow the runtime's own conventions, one guarded "
                           "transaction each.")
    allow = box.addButton("Allow writes", QMessageBox.ButtonRole.AcceptRole)
    box.addButton("Open read-only", QMessageBox.ButtonRole.RejectRole)
    box.exec()
    allowed = box.clickedButton() is allow
    if allowed:
        confirm_writes(descriptor)
    return allowed


def confirm_writes(descriptor: SourceDescriptor) -> None:
    """Remember the operator's yes for this file (the next window opens it writable without asking)."""
    settings = open_settings()
    settings.setValue(_key(descriptor.location), True)
    settings.sync()
