"""Sending, cancelling and delivering an operator's message to an agent.

Each is one transaction guarded by compare-and-set on the message's status (only `pending` moves, and only
once), appends an audit record and records its changes for the bus. A cancel racing the agent's delivery
therefore either cancels a message the agent never sees or finds it delivered: never both, never neither.

On PostgreSQL (migration 0016) the server's SECURITY DEFINER functions do the work: operators send and cancel;
an agent takes only the messages of an agent its own login registered. The SQLite path below does the same in
Python. Delivery makes each message a turn group of its own and a `user` item at the end of the agent's
context, so the operator's edits, locks and hiding apply to it like to any other item.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, text, update

from agentdesk.store.audit.state import text_hash
from agentdesk.store.errors import Conflict, InvalidInput, NotFound
from agentdesk.store.ids import new_id
from agentdesk.store.messages.reads import CANCELLED, DELIVERED, PENDING, Message, message_of
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.postgres.roles import require
from agentdesk.store.uow import UnitOfWork, adopt_server_changes, affected, on_server
from agentdesk.store.validation import check_name, estimate_tokens

MAX_MESSAGE_BYTES = 1_000_000
"""1 MB, the issue's limit for anything an operator or agent hands over (as for approval arguments)."""
FINISHED = ("done", "failed", "cancelled")

SERVER_SEND = text("SELECT * FROM agentdesk_send_message(:id, :agent, :content, :actor, :origin)")
SERVER_CANCEL = text("SELECT * FROM agentdesk_cancel_message(:id, :actor, :origin)")
SERVER_TAKE = text("SELECT * FROM agentdesk_take_messages(:agent, :actor, :origin)")


@dataclass(frozen=True, slots=True)
class Delivered:
    """A message the agent just took: it is now the context item `item_id`."""

    message_id: str
    item_id: str
    content: str
    author: str
    sent_at: float


def check_message(content: str) -> str:
    """One sentence for an empty or oversize message, before anything is written."""
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput("A message needs some text.")
    size = len(content.encode("utf-8", "surrogatepass"))
    if size > MAX_MESSAGE_BYTES:
        raise InvalidInput(f"The message is {size:,} bytes; the limit is {MAX_MESSAGE_BYTES:,} bytes (1 MB).")
    return content


def _finished(agent_name: str, status: str) -> Conflict:
    return Conflict(f"The agent {agent_name} has finished (its session is {status}); a message would never be read.")


def send(store: Store, agent_id: str, content: str, actor: str) -> str:
    """Queue a message for the agent; returns its id. Refused when the agent's session has finished."""
    actor = check_name("actor name", actor)
    check_message(content)
    require(store.login, "operator", "sending a message")
    message_id = new_id("msg")
    with UnitOfWork(store) as uow:
        if on_server(uow):
            found = uow.session.execute(SERVER_SEND, {"id": message_id, "agent": agent_id, "content": content,
                                                      "actor": actor, "origin": store.origin}).one()
            if found.outcome == "not found":
                raise NotFound(f"There is no agent with id {agent_id}.")
            if found.outcome == "finished":
                raise _finished(_agent_name(store, agent_id), found.status)
            if found.outcome != "ok":  # the server's own size and emptiness checks, matching check_message
                raise InvalidInput("The message is empty or over 1 MB.")
            adopt_server_changes(uow, found.changes)
            return message_id
        agent = uow.session.get(sc.AgentRow, agent_id)
        if agent is None:
            raise NotFound(f"There is no agent with id {agent_id}.")
        session = uow.session.get(sc.SessionRow, agent.session_id)
        if session is not None and session.status in FINISHED:
            raise _finished(agent.name, session.status)
        uow.session.add(sc.MessageRow(id=message_id, agent_id=agent_id, session_id=agent.session_id, content=content,
                                      status=PENDING, created_at=uow.now, created_by=actor, created_login=None,
                                      revision=1))
        uow.record("message", "insert", message_id, _parents(agent.id, agent.session_id), 1)
        uow.audit(actor, "message.send", "message", message_id,
                  {"agent": agent_id, "bytes": len(content.encode("utf-8", "surrogatepass")),
                   "content_hash": text_hash(content)})
    return message_id


def cancel(store: Store, message_id: str, actor: str) -> None:
    """Cancel a pending message; a `Conflict` saying who took or cancelled it first otherwise."""
    actor = check_name("actor name", actor)
    require(store.login, "operator", "cancelling a message")
    M = sc.MessageRow
    with UnitOfWork(store) as uow:
        if on_server(uow):
            found = uow.session.execute(SERVER_CANCEL, {"id": message_id, "actor": actor,
                                                        "origin": store.origin}).one()
            if found.outcome == "not found":
                raise NotFound(f"There is no message with id {message_id}.")
            if found.outcome == "lost":
                raise _settled(message_id, found.status, found.settled_by)
            adopt_server_changes(uow, found.changes)
            return
        done = uow.session.execute(update(M).where(M.id == message_id, M.status == PENDING).values(
            status=CANCELLED, settled_at=uow.now, settled_by=actor, revision=M.revision + 1)
            .execution_options(synchronize_session=False))
        row = uow.session.get(M, message_id)
        if row is None:
            raise NotFound(f"There is no message with id {message_id}.")
        if affected(done) != 1:
            raise _settled(message_id, row.status, row.settled_by)
        uow.session.refresh(row)
        uow.record("message", "update", message_id, _parents(row.agent_id, row.session_id), row.revision)
        uow.audit(actor, "message.cancel", "message", message_id, {"agent": row.agent_id})


def take(store: Store, agent_id: str, actor: str) -> list[Delivered]:
    """Deliver the agent's pending messages, oldest first: each becomes a context item at the end. Runtime write."""
    actor = check_name("actor name", actor)
    M = sc.MessageRow
    if not _has_pending(store, agent_id):
        return []  # the common case, at every model call: one indexed read, no write, no lock
    with UnitOfWork(store, runtime=True) as uow:
        if on_server(uow):
            rows = uow.session.execute(SERVER_TAKE, {"agent": agent_id, "actor": actor,
                                                     "origin": store.origin}).all()
            for row in rows:
                adopt_server_changes(uow, row.changes)
            return [Delivered(r.message_id, r.item_id, r.content, r.created_by, r.created_at) for r in rows]
        agent = uow.session.get(sc.AgentRow, agent_id)
        if agent is None:
            raise NotFound(f"There is no agent with id {agent_id}.")
        pending = uow.session.execute(select(M).where(M.agent_id == agent_id, M.status == PENDING)
                                      .order_by(M.created_at, M.id)).scalars().all()
        delivered = []
        for message in pending:
            item_id = _append(uow, agent, message.content)
            done = uow.session.execute(update(M).where(M.id == message.id, M.status == PENDING).values(
                status=DELIVERED, settled_at=uow.now, settled_by=actor, item_id=item_id, revision=M.revision + 1)
                .execution_options(synchronize_session=False))
            if affected(done) != 1:  # cannot happen under the write lock; refuse rather than deliver twice
                raise Conflict(f"The message {message.id} was settled while it was being delivered.")
            uow.record("message", "update", message.id, _parents(agent_id, agent.session_id), message.revision + 1)
            uow.audit(actor, "message.deliver", "message", message.id, {"agent": agent_id, "item": item_id})
            delivered.append(Delivered(message.id, item_id, message.content, message.created_by, message.created_at))
        return delivered


def _append(uow: UnitOfWork, agent: sc.AgentRow, content: str) -> str:
    """A turn group of its own and one `user` item at the end of the agent's context (as the runtime appends)."""
    G, Item = sc.ContextGroupRow, sc.ContextItemRow
    group_id, item_id = new_id("grp"), new_id("itm")
    last_group = uow.session.execute(select(G.ordinal).where(G.agent_id == agent.id)
                                     .order_by(G.ordinal.desc()).limit(1)).scalar()
    last_item = uow.session.execute(select(Item.position).where(Item.agent_id == agent.id)
                                    .order_by(Item.position.desc()).limit(1)).scalar()
    tokens = estimate_tokens(content)
    uow.session.add(G(id=group_id, agent_id=agent.id, ordinal=(last_group or 0) + 1, kind="message", revision=2,
                      created_at=uow.now))
    uow.session.flush()
    uow.session.add(Item(id=item_id, agent_id=agent.id, group_id=group_id, position=(last_item or 0) + 1,
                         kind="message", role="user", content=content, visible=True, locked=False, revision=1,
                         token_estimate=tokens, removed=False, created_at=uow.now))
    uow.session.flush()
    uow.session.add(sc.ContextItemRevisionRow(item_id=item_id, revision=1, content=content, token_estimate=tokens,
                                              created_at=uow.now))
    agent.context_revision += 1
    uow.record("context_group", "insert", group_id, {"agent": agent.id})
    uow.record("context_item", "insert", item_id, {"agent": agent.id, "group": group_id}, 1)
    uow.record("context_group", "update", group_id, {"agent": agent.id}, 2)
    uow.record("context", "update", agent.id, {"agent": agent.id, "session": agent.session_id},
               agent.context_revision)
    return item_id


def _has_pending(store: Store, agent_id: str) -> bool:
    M = sc.MessageRow
    with store.reading() as s:
        return s.execute(select(M.id).where(M.agent_id == agent_id, M.status == PENDING).limit(1)).first() is not None


def _parents(agent_id: str, session_id: str) -> dict[str, str]:
    return {"agent": agent_id, "session": session_id}


def _settled(message_id: str, status: str, by: str | None) -> Conflict:
    who = by or "someone"
    if status == DELIVERED:
        return Conflict(f"The message {message_id} was already delivered (taken by {who}); it can no longer be "
                        "cancelled.")
    return Conflict(f"The message {message_id} was already {status} by {who}.")


def _agent_name(store: Store, agent_id: str) -> str:
    with store.reading() as s:
        row = s.get(sc.AgentRow, agent_id)
        return row.name if row is not None else agent_id


def message(store: Store, message_id: str) -> Message:
    """One message, or `NotFound`."""
    with store.reading() as s:
        row = s.get(sc.MessageRow, message_id)
        if row is None:
            raise NotFound(f"There is no message with id {message_id}.")
        return message_of(row)
