"""Operators' messages for a lensagent agent: a `pending_messages` row, the way lensagent queues user input.

lensagent queues input for an agent as a `messages` row (role `user`, the conversation's history) plus a
`pending_messages` row pointing at it (reference §2.1: `UNIQUE(agent_id, ordinal)`, `revision` from 0); the
runtime takes the lowest ordinal at its next step and deletes the pending row. agentdesk writes exactly those two
rows in one `BEGIN IMMEDIATE` transaction, with the next free ordinal, `revision` 0, the operator's name in
`metadata_json` (`{"source": "agentdesk", "actor": ...}`), and bumps `instance.state_revision` like every
lensagent write. Only with `--allow-writes`, and the window asks once per database (gui/window/write_consent).

Cancelling deletes a pending row agentdesk queued (and its history row), guarded on the row still being there
at the revision it was shown: the runtime has not taken it yet. Rows lensagent queued itself (a user's or a
sub-agent's input) are shown as pending but not cancelled here: what a cancel means to the runtime is unknown.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.exc import IntegrityError

from agentdesk.store.errors import Conflict, NotFound, Unsupported
from agentdesk.store.ids import new_id
from agentdesk.store.messages.commands import check_message
from agentdesk.store.messages.reads import PENDING, Message
from agentdesk.store.persistence.bus import Change
from agentdesk.store.source import Capability
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources.lensagent.writes import ORIGIN, agent_parents, bump_instance
from agentdesk.store.sources.sql import one, rows
from agentdesk.store.validation import check_name

SOURCE = "agentdesk"
CHUNK = 500


def _metadata(raw: Any) -> dict[str, Any]:
    value = parse.json_value(raw)
    return value if isinstance(value, dict) else {}


def _author(row: dict[str, Any]) -> str:
    meta = _metadata(row.get("metadata_json"))
    if meta.get("source") == SOURCE and isinstance(meta.get("actor"), str):
        return str(meta["actor"])
    if row.get("source_agent_name"):
        return f"agent {row['source_agent_name']}"
    return "a lensagent user"


class LensagentMessages:
    """The `MessageDesk` (store/messages/desk.py) of a lensagent source."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def pending(self, agent_id: str) -> list[Message]:
        with self.source.reading() as conn:
            found = rows(conn, "SELECT p.id, p.agent_id, a.session_id, p.content, p.created_at, p.revision, "
                               "m.metadata_json, s.name AS source_agent_name FROM pending_messages p "
                               "JOIN agents a ON a.id = p.agent_id LEFT JOIN messages m ON m.id = p.message_id "
                               "LEFT JOIN agents s ON s.id = p.source_agent_id WHERE p.agent_id = :a "
                               "ORDER BY p.ordinal", a=agent_id)
        return [Message(str(r["id"]), str(r["agent_id"]), str(r["session_id"]), str(r["content"]), PENDING,
                        parse.epoch(r["created_at"]), _author(r), None, None, None, int(r["revision"] or 0))
                for r in found]

    def authors(self, item_ids: Sequence[str]) -> dict[str, str]:
        """Context items made from a message agentdesk queued (`context_items.source_id` is the message)."""
        found: dict[str, str] = {}
        with self.source.reading() as conn:
            for n in range(0, len(item_ids), CHUNK):
                chunk = list(item_ids[n:n + CHUNK])
                marks = ", ".join(f":i{k}" for k in range(len(chunk)))
                for r in rows(conn, f"SELECT c.id, m.metadata_json FROM context_items c JOIN messages m "
                                    f"ON m.id = c.source_id WHERE c.id IN ({marks})",
                              **{f"i{k}": v for k, v in enumerate(chunk)}):
                    meta = _metadata(r["metadata_json"])
                    if meta.get("source") == SOURCE and isinstance(meta.get("actor"), str):
                        found[str(r["id"])] = str(meta["actor"])
        return found

    def send(self, agent_id: str, content: str, actor: str) -> str:
        actor = check_name("actor name", actor)
        check_message(content)
        with self.source.writing(Capability.SEND_MESSAGE) as conn:
            published = queue(conn, self.source.layout, agent_id, content, actor)
        self.source.bus.publish(published)
        return published[0].id

    def cancel(self, message_id: str, actor: str) -> None:
        check_name("actor name", actor)
        with self.source.writing(Capability.SEND_MESSAGE) as conn:
            published = withdraw(conn, self.source.layout, message_id)
        self.source.bus.publish(published)


def _run(conn: Connection, sql: str, **params: Any) -> int:
    return int(conn.execute(text(sql), params).rowcount)  # type: ignore[attr-defined]


def queue(conn: Connection, layout: Any, agent_id: str, content: str, actor: str) -> list[Change]:
    """The two rows lensagent's own queueing writes; refused for a stopped agent."""
    agent = one(conn, "SELECT id, name, state FROM agents WHERE id = :a", a=agent_id)
    if agent is None:
        raise NotFound(f"There is no agent with id {agent_id}.")
    if agent["state"] == "STOPPED":
        raise Conflict(f"The agent {agent['name']} has finished (lensagent stopped it); a message would never be "
                       "read.")
    now = parse.iso_now()
    message_id, pending_id = new_id("msg"), new_id("pnd")
    ordinal = one(conn, "SELECT coalesce(max(ordinal) + 1, 0) AS n FROM pending_messages WHERE agent_id = :a",
                  a=agent_id)
    metadata = json.dumps({"source": SOURCE, "actor": actor}, ensure_ascii=False)
    try:
        _run(conn, "INSERT INTO messages (id, agent_id, source_agent_id, role, content, metadata_json, created_at) "
                   "VALUES (:id, :a, NULL, 'user', :c, :meta, :now)", id=message_id, a=agent_id, c=content,
             meta=metadata, now=now)
        _run(conn, "INSERT INTO pending_messages (id, agent_id, message_id, source_agent_id, content, ordinal, "
                   "revision, created_at, updated_at) VALUES (:id, :a, :m, NULL, :c, :n, 0, :now, :now)",
             id=pending_id, a=agent_id, m=message_id, c=content, n=int(ordinal["n"] if ordinal else 0), now=now)
    except IntegrityError as exc:  # the ordinal taken meanwhile: cannot happen under BEGIN IMMEDIATE
        raise Conflict(f"Another message for {agent['name']} was queued at the same moment; try again.") from exc
    bump_instance(conn, layout)
    parents = agent_parents(conn, agent_id) | {"agent": agent_id}
    return [Change("message", "insert", pending_id, parents, 0, origin=ORIGIN),
            Change("context", "update", agent_id, {"agent": agent_id, "session": parents.get("session", "")},
                   origin=ORIGIN)]


def withdraw(conn: Connection, layout: Any, pending_id: str) -> list[Change]:
    found = one(conn, "SELECT p.id, p.agent_id, p.message_id, p.revision, m.metadata_json FROM pending_messages p "
                      "LEFT JOIN messages m ON m.id = p.message_id WHERE p.id = :p", p=pending_id)
    if found is None:
        raise Conflict(f"The message {pending_id} is no longer pending: lensagent took it (or it never existed).")
    if _metadata(found["metadata_json"]).get("source") != SOURCE:
        raise Unsupported("lensagent queued this message itself; agentdesk cancels only the messages it queued.")
    if _run(conn, "DELETE FROM pending_messages WHERE id = :p AND revision = :rev", p=pending_id,
            rev=found["revision"]) != 1:
        raise Conflict(f"The message {pending_id} changed while it was being cancelled; reload and try again.")
    _run(conn, "DELETE FROM messages WHERE id = :m", m=found["message_id"])
    bump_instance(conn, layout)
    agent_id = str(found["agent_id"])
    parents = agent_parents(conn, agent_id) | {"agent": agent_id}
    return [Change("message", "delete", pending_id, parents, origin=ORIGIN),
            Change("context", "update", agent_id, {"agent": agent_id, "session": parents.get("session", "")},
                   origin=ORIGIN)]
