"""Operator writes on a lensagent database, the way its store guards them (reference §2.1, §3, §4.5).

Each function runs inside one `BEGIN IMMEDIATE` transaction the caller opened, re-reads what it
guards, writes with compare-and-set (`WHERE ... AND revision = :expected`) and checks the row
count, bumps every revision lensagent's own store bumps, then `instance.state_revision`, and
returns the `Change` events to publish after commit. A failed guard raises before anything
is written; the transaction rolls back.

What a direct write cannot do: append to lensagent's EventLog (a JSONL hash chain kept in a
file beside the database, written only by the runtime's process) or tell a running lensagent
through its in-process EventBus. The source's `notes` says so to the operator.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, text

from agentdesk.store.errors import AlreadyDecided, Conflict, InvalidInput, NotFound, StaleRevision
from agentdesk.store.ids import new_id
from agentdesk.store.persistence.bus import Change
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources.lensagent import approvals, context
from agentdesk.store.sources.lensagent.layout import Layout
from agentdesk.store.sources.sql import one, rows

ORIGIN = "agentdesk"


def _run(conn: Connection, sql: str, **params: Any) -> int:
    return int(conn.execute(text(sql), params).rowcount)  # type: ignore[attr-defined]


def bump_instance(conn: Connection, layout: Layout) -> None:
    """The global change counter lensagent's watchers (and ours) key on."""
    if layout.has("instance"):
        _run(conn, "UPDATE instance SET state_revision = state_revision + 1 WHERE id = 1")


def agent_parents(conn: Connection, agent_id: str | None) -> dict[str, str]:
    if agent_id is None:
        return {}
    a = one(
        conn,
        "SELECT a.task_id, a.session_id, a.parent_agent_id, t.project_id FROM agents a "
        "JOIN tasks t ON t.id = a.task_id WHERE a.id = :a",
        a=agent_id,
    )
    if a is None:
        return {}
    parents = {"project": a["project_id"], "task": a["task_id"], "session": a["session_id"]}
    return parents | ({"parent_agent": a["parent_agent_id"]} if a["parent_agent_id"] else {})


# -- approvals -------------------------------------------------------------------------------
def decide(
    conn: Connection, layout: Layout, call_id: str, approve: bool, actor: str, reason: str | None
) -> list[Change]:
    """reviewCall: WAITING/policy_review → QUEUED (approve) or TERMINAL cancelled + a result (deny)."""
    found = rows(conn, f"SELECT * FROM ({approvals.select(layout)}) WHERE id = :i", i=call_id)
    if not found:
        raise NotFound(f"There is no approval with id {call_id} (no call of that id was held for review).")
    call = found[0]
    if approvals.status_of(call) != "pending":
        done = approvals.value(call)
        raise AlreadyDecided(call_id, done.status, done.decided_by or "lensagent", call["updated_at"])
    now = parse.iso_now()
    review = {
        "approved": approve,
        "reviewer": "operator",
        "actor": actor,
        "reason": reason,
        "decided_at": now,
        "source": "agentdesk",
        "auto_review": parse.json_value(call["auto_review_json"]),
    }
    sets = [
        "state = :state",
        "wait_reason = NULL",
        "auto_review_passed = :passed",
        "revision = revision + 1",
        "updated_at = :now",
    ]
    if layout.has("calls", "auto_review_json"):
        sets.append("auto_review_json = :review")
    if not approve:
        sets.append("outcome = 'cancelled'")
    won = _run(
        conn,
        f"UPDATE calls SET {', '.join(sets)} WHERE id = :i AND state = 'WAITING' "
        "AND wait_reason = 'policy_review' AND revision = :rev",
        state="QUEUED" if approve else "TERMINAL",
        passed=1 if approve else 0,
        now=now,
        review=json.dumps(review, ensure_ascii=False),
        i=call_id,
        rev=call["revision"],
    )
    if won != 1:  # cannot happen under BEGIN IMMEDIATE unless the row moved between read and write
        raise StaleRevision(f"Call {call_id} changed while it was being decided; reload and try again.")
    if not approve:
        _deny_result(conn, layout, call_id, actor, reason or "", now)
    bump_instance(conn, layout)
    parents = agent_parents(conn, call["agent_id"]) | (
        {"agent": call["agent_id"]} if call["agent_id"] else {}
    )
    parents |= {"run": call["run_id"]} if call["run_id"] else {}
    return [
        Change("approval", "update", call_id, parents, call["revision"] + 1, origin=ORIGIN),
        Change("span", "update", f"call:{call_id}", parents, origin=ORIGIN),
        Change("span", "update", f"gate:{call_id}", parents, origin=ORIGIN),
    ]


def _deny_result(conn: Connection, layout: Layout, call_id: str, actor: str, reason: str, now: str) -> None:
    row: dict[str, Any] = {
        "id": new_id("res"),
        "call_id": call_id,
        "outcome": "cancelled",
        "content_json": json.dumps(f"Denied by operator {actor}: {reason}", ensure_ascii=False),
        "truncated": 0,
        "error_code": "policy_denied",
        "error_message": reason,
        "created_at": now,
    }
    if layout.has("results", "capture"):
        row |= {"capture": "complete", "stored": "full"}
    _run(conn, f"INSERT INTO results ({', '.join(row)}) VALUES ({', '.join(':' + k for k in row)})", **row)


# -- questions -------------------------------------------------------------------------------
def answer(conn: Connection, layout: Layout, call_id: str, text_answer: str, actor: str,
           expected_revision: int | None) -> list[Change]:
    """completeCall on a call waiting for user input: TERMINAL `success` plus a result whose content is the
    answer (and, beside it, who gave it: `{"answer": …, "agentdesk_answered_by": …}`), compare-and-set on
    the call's revision; `instance.state_revision` bumped."""
    from agentdesk.store.asks.commands import AlreadyAnswered
    from agentdesk.store.sources.lensagent import asks

    found = rows(conn, f"SELECT * FROM ({asks.select(layout, False)}) WHERE id = :i", i=call_id)
    if not found:
        raise NotFound(f"There is no question with id {call_id} (no call of that id waited for user input).")
    call = found[0]
    shown = asks.value(call)
    if shown.status != "pending":
        raise AlreadyAnswered(call_id, shown.status, shown.answered_by or "lensagent",
                              call.get("answered_at") or call["updated_at"])
    if expected_revision is not None and expected_revision != call["revision"]:
        raise StaleRevision(f"Call {call_id} changed since it was shown (revision {call['revision']}); look again.")
    now = parse.iso_now()
    won = _run(conn, "UPDATE calls SET state = 'TERMINAL', wait_reason = NULL, outcome = 'success', "
               "revision = revision + 1, updated_at = :now WHERE id = :i AND state = 'WAITING' "
               "AND wait_reason = 'user_input' AND revision = :rev", now=now, i=call_id, rev=call["revision"])
    if won != 1:
        raise StaleRevision(f"Call {call_id} changed while it was being answered; reload and try again.")
    row: dict[str, Any] = {
        "id": new_id("res"), "call_id": call_id, "outcome": "success",
        "content_json": json.dumps({"answer": text_answer, asks.ANSWERED_BY: actor}, ensure_ascii=False),
        "truncated": 0, "error_code": None, "error_message": None, "created_at": now,
    }
    if layout.has("results", "capture"):
        row |= {"capture": "complete", "stored": "full"}
    _run(conn, f"INSERT INTO results ({', '.join(row)}) VALUES ({', '.join(':' + k for k in row)})", **row)
    bump_instance(conn, layout)
    parents = agent_parents(conn, call["agent_id"]) | ({"agent": call["agent_id"]} if call["agent_id"] else {})
    parents |= {"run": call["run_id"]} if call["run_id"] else {}
    return [Change("ask", "update", call_id, parents, call["revision"] + 1, origin=ORIGIN),
            Change("span", "update", f"call:{call_id}", parents, origin=ORIGIN)]


# -- context ---------------------------------------------------------------------------------
def _bump_agent_context(conn: Connection, agent_id: str, now: str) -> int:
    """`agents.context_revision` (and `revision`) +1, compare-and-set; returns the new context revision."""
    agent = one(conn, "SELECT context_revision FROM agents WHERE id = :a", a=agent_id)
    if agent is None:
        raise NotFound(f"There is no agent with id {agent_id}.")
    won = _run(
        conn,
        "UPDATE agents SET context_revision = context_revision + 1, revision = revision + 1, "
        "updated_at = :now WHERE id = :a AND context_revision = :rev",
        now=now,
        a=agent_id,
        rev=agent["context_revision"],
    )
    if won != 1:
        raise StaleRevision(f"The context of agent {agent_id} changed underneath; reload and try again.")
    return int(agent["context_revision"]) + 1


def _context_changes(conn: Connection, agent_id: str, revision: int) -> list[Change]:
    parents = agent_parents(conn, agent_id)
    return [
        Change(
            "context",
            "update",
            agent_id,
            {"agent": agent_id, "session": parents.get("session", "")},
            revision,
            origin=ORIGIN,
        ),
        Change("agent", "update", agent_id, parents, origin=ORIGIN),
    ]


def set_group_visibility(
    conn: Connection, layout: Layout, group_id: str, visible: bool, expected_revision: int
) -> list[Change]:
    """setContextVisibility for one turn group: every item of the group shows or hides together."""
    group = one(conn, "SELECT id, agent_id, revision FROM context_turn_groups WHERE id = :g", g=group_id)
    if group is None:
        raise NotFound(f"There is no turn group with id {group_id}.")
    if group["revision"] != expected_revision:
        raise StaleRevision(
            f"Turn group {group_id} changed since you loaded it (revision {group['revision']}, "
            f"you had {expected_revision}); reload and try again."
        )
    items = rows(conn, "SELECT id, visible, locked FROM context_items WHERE turn_group_id = :g", g=group_id)
    if set(i["id"] for i in items) & context.covered_ids(conn, layout, group["agent_id"]):
        raise Conflict("This turn group is covered by a compaction, and lensagent cannot undo a compaction.")
    if not visible and any(i["locked"] for i in items):
        raise Conflict("This turn group holds a locked item; lensagent keeps locked items in the context.")
    now = parse.iso_now()
    if (
        _run(
            conn,
            "UPDATE context_turn_groups SET revision = revision + 1 WHERE id = :g AND revision = :rev",
            g=group_id,
            rev=expected_revision,
        )
        != 1
    ):
        raise StaleRevision(f"Turn group {group_id} changed underneath; reload and try again.")
    context_revision = _bump_agent_context(conn, group["agent_id"], now)
    changed = [i["id"] for i in items if bool(i["visible"]) != visible]
    _run(
        conn,
        "UPDATE context_items SET visible = :vis, revision = revision + 1, updated_at = :now "
        "WHERE turn_group_id = :g AND visible != :vis",
        vis=int(visible),
        now=now,
        g=group_id,
    )
    bump_instance(conn, layout)
    agent = group["agent_id"]
    return (
        [
            Change("context_item", "update", i, {"agent": agent, "group": group_id}, origin=ORIGIN)
            for i in changed
        ]
        + [
            Change(
                "context_group", "update", group_id, {"agent": agent}, expected_revision + 1, origin=ORIGIN
            )
        ]
        + _context_changes(conn, agent, context_revision)
    )


def edit_item(
    conn: Connection, layout: Layout, item_id: str, content: str, expected_revision: int
) -> list[Change]:
    """updateContextItem: new content under the item's revision; locked or covered items refuse."""
    item = one(
        conn,
        "SELECT id, agent_id, turn_group_id, kind, locked, revision FROM context_items WHERE id = :i",
        i=item_id,
    )
    if item is None:
        raise NotFound(f"There is no context item with id {item_id}.")
    if item["revision"] != expected_revision:
        raise StaleRevision(
            f"Context item {item_id} changed since you loaded it (revision {item['revision']}, "
            f"you had {expected_revision}); reload and try again."
        )
    if item["locked"]:
        raise Conflict(f"Context item {item_id} is locked; lensagent does not let locked items change.")
    if item_id in context.covered_ids(conn, layout, item["agent_id"]):
        raise Conflict(f"Context item {item_id} is covered by a compaction, and lensagent cannot undo one.")
    if item["kind"] == "tool_calls":
        try:
            json.loads(content)
        except ValueError as exc:
            raise InvalidInput(
                f"A tool_calls item holds the calls as JSON, and this is not JSON: {exc}."
            ) from exc
    now = parse.iso_now()
    if (
        _run(
            conn,
            "UPDATE context_items SET content = :c, revision = revision + 1, updated_at = :now "
            "WHERE id = :i AND revision = :rev AND locked = 0",
            c=content,
            now=now,
            i=item_id,
            rev=expected_revision,
        )
        != 1
    ):
        raise StaleRevision(f"Context item {item_id} changed underneath; reload and try again.")
    _run(
        conn, "UPDATE context_turn_groups SET revision = revision + 1 WHERE id = :g", g=item["turn_group_id"]
    )
    context_revision = _bump_agent_context(conn, item["agent_id"], now)
    bump_instance(conn, layout)
    agent, group = item["agent_id"], item["turn_group_id"]
    return [
        Change(
            "context_item",
            "update",
            item_id,
            {"agent": agent, "group": group},
            expected_revision + 1,
            origin=ORIGIN,
        ),
        Change("context_group", "update", group, {"agent": agent}, origin=ORIGIN),
        *_context_changes(conn, agent, context_revision),
    ]
