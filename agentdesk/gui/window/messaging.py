"""Send a message…: one dialog for the tree, the timeline and the context editor, sent on the runner.

The three views only ask (a `message_requested(agent id, name)` signal); the window opens the dialog
(gui/messages), sends what the operator wrote, and says where it went: the status bar names the message id, a
refusal (the agent finished, over 1 MB, a viewer's login) goes to the message bar in one sentence.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QStatusBar, QWidget

from agentdesk.gui.messages.dialog import SendMessageDialog
from agentdesk.model.messages.sending import send_message
from agentdesk.model.plain import shown_line
from agentdesk.model.services import Services
from agentdesk.model.tasks import spawn


class Messaging:
    def __init__(self, parent: QWidget, services: Services, status: QStatusBar,
                 report_error: Callable[[str], None]) -> None:
        self._parent = parent
        self._services = services
        self._status = status
        self._report_error = report_error
        self.dialog: SendMessageDialog | None = None
        """The dialog open now (tests fill it in and accept it)."""

    def open(self, agent_id: str, name: str) -> SendMessageDialog:
        if self.dialog is not None:
            self.dialog.close()
        dialog = self.dialog = SendMessageDialog(agent_id, name, self._parent)
        dialog.accepted.connect(lambda: self._send(agent_id, name, dialog.text()))
        dialog.finished.connect(lambda _: self._forget(dialog))
        dialog.open()
        return dialog

    def _forget(self, dialog: SendMessageDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None
        dialog.deleteLater()

    def _send(self, agent_id: str, name: str, text: str) -> None:
        who = shown_line(name, 80)  # the pending row in the context editor is the confirmation; the status bar is short
        spawn(self._deliver(agent_id, text),
              on_error=lambda exc: self._report_error(f"The message to {who} was not sent: {exc}"))

    async def _deliver(self, agent_id: str, text: str) -> None:
        await send_message(self._services, agent_id, text)
        self._status.showMessage("Message queued.", 10_000)
