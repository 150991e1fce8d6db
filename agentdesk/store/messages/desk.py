"""Where a window sends messages: agentdesk's own store, or a foreign runtime that has a message queue.

The window and its models ask `message_desk(source)` instead of checking the source's type: agentdesk's own
store always has one; a foreign source offers one through a `message_desk()` method (lensagent writes its own
`pending_messages`, store/sources/lensagent); any other gets `None`, and `why_no_messages` says why in one
sentence for the disabled action's tooltip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agentdesk.store.messages import commands
from agentdesk.store.messages.reads import Message, delivered_authors, pending_messages
from agentdesk.store.persistence.database import Store, own_store
from agentdesk.store.source import Capability


class MessageDesk(Protocol):
    def pending(self, agent_id: str) -> list[Message]:
        """The agent's pending messages, oldest first."""

    def authors(self, item_ids: Sequence[str]) -> dict[str, str]:
        """item id -> who wrote it, for the items that are delivered messages."""

    def send(self, agent_id: str, content: str, actor: str) -> str:
        """Queue a message; its id."""

    def cancel(self, message_id: str, actor: str) -> None:
        """Cancel a pending message (`Conflict` once it was delivered or cancelled)."""


class NativeDesk:
    """agentdesk's own store: store/messages' commands."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def pending(self, agent_id: str) -> list[Message]:
        return pending_messages(self.store, agent_id)

    def authors(self, item_ids: Sequence[str]) -> dict[str, str]:
        return delivered_authors(self.store, item_ids)

    def send(self, agent_id: str, content: str, actor: str) -> str:
        return commands.send(self.store, agent_id, content, actor)

    def cancel(self, message_id: str, actor: str) -> None:
        commands.cancel(self.store, message_id, actor)


def message_desk(source: object) -> MessageDesk | None:
    store = own_store(source)
    if store is not None:
        return NativeDesk(store)
    offered = getattr(source, "message_desk", None)
    desk = offered() if callable(offered) else None
    return desk if desk is not None else None


def messaging_refusal(source: object) -> str | None:
    """Why this source cannot take a message now (None: it can): no queue at all, or opened read-only."""
    store = own_store(source)
    if store is not None:  # PostgreSQL: a viewer's (or an agent's) login may not send; SQLite has no logins
        login = store.login
        return None if login is None or login.may("operator") else login.refusal("sending a message", "operator")
    if message_desk(source) is None:
        return why_no_messages(source)
    capabilities: frozenset[Capability] = getattr(source, "capabilities", frozenset())
    if Capability.SEND_MESSAGE in capabilities:
        return None
    why_not = getattr(source, "why_not", None)
    return (why_not(Capability.SEND_MESSAGE) if callable(why_not) else "") or why_no_messages(source)


def why_no_messages(source: object) -> str:
    descriptor = getattr(source, "descriptor", None)
    kind = getattr(descriptor, "kind", None) or "This source"
    return (f"{kind} has no queue agentdesk can put a message in: messages reach agentdesk's own agents and "
            "lensagent agents only.")
