"""Sending a message from the window: on the runner, never the GUI thread; why a source cannot take one."""

from __future__ import annotations

from agentdesk.model.runner import OnDone, OnError
from agentdesk.model.services import Services
from agentdesk.store.messages.desk import message_desk, why_no_messages
from agentdesk.store.messages.desk import messaging_refusal as source_refusal


def messaging_refusal(services: Services) -> str | None:
    """Why "Send a message…" is disabled on this source (None: enabled)."""
    return source_refusal(services.source)


def send_message(services: Services, agent_id: str, text: str, on_done: OnDone, on_error: OnError) -> None:
    desk = message_desk(services.source)
    if desk is None:
        on_error(RuntimeError(why_no_messages(services.source)))
        return
    services.runner.submit(desk.send, agent_id, text, services.actor, on_done=on_done, on_error=on_error)
