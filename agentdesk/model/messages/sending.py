"""Sending a message from the window: awaited on the runner, never the GUI thread; why a source cannot take one."""

from __future__ import annotations

from agentdesk.model.services import Services
from agentdesk.store.messages.desk import message_desk, why_no_messages
from agentdesk.store.messages.desk import messaging_refusal as source_refusal


def messaging_refusal(services: Services) -> str | None:
    """Why "Send a message…" is disabled on this source (None: enabled)."""
    return source_refusal(services.source)


async def send_message(services: Services, agent_id: str, text: str) -> str:
    """The queued message's id; raises with the one sentence saying why it was not sent."""
    desk = message_desk(services.source)
    if desk is None:
        raise RuntimeError(why_no_messages(services.source))
    message_id: str = await services.runner.run(desk.send, agent_id, text, services.actor)
    return message_id
