"""An agent's context in a lensagent database: turn groups, items, compactions, projection savings.

- Items are `context_items` in `ordinal` order, each in its turn group; `visible`, `locked`
  and `revision` are lensagent's own.
- A compaction is a `kind='compaction'` item. From 0.1.2 on, `context_compactions` lists the
  items it covers (`covered_item_ids_json`), its `focus` and `source_revision`; a covered item
  gets `compaction_id` = the compaction item's id, which is also the compaction's id. A 0.1.0
  database records no covered items, so its compactions cover nothing in our model: shown as
  a summary item, never guessed from hidden rows.
- lensagent cannot undo a compaction, so `undone_at` is always None.
- `projection_decisions` record how much lensagent's context projection shrank a prompt. The
  editor's values are fixed types, so a decision tied to a compaction (its details name
  covered items) is appended to that compaction's focus ("· projection saved N tokens ..."),
  every decision is on the attempt span's `projection` attribute, and `projection_savings()`
  lists them all for the agent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import NotFound
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources.lensagent.layout import Layout
from agentdesk.store.sources.lensagent.tree import DEFAULT_CONTEXT_BUDGET
from agentdesk.store.sources.sql import one, rows
from agentdesk.store.validation import estimate_tokens

ITEM_SQL = (
    "SELECT id, agent_id, turn_group_id, turn_group_ordinal, kind, source_id, role, content, tool_call_id, "
    "tool_name, ordinal, visible, locked, revision, created_at, updated_at FROM context_items"
)


@dataclass(frozen=True, slots=True)
class ProjectionSaving:
    """One `projection_decisions` row: what one projection stage saved."""

    id: str
    agent_id: str
    attempt_id: str | None
    stage: str
    source_tokens: int
    projected_tokens: int
    item_ids: tuple[str, ...]
    created_at: datetime

    @property
    def saved_tokens(self) -> int:
        return self.source_tokens - self.projected_tokens

    def describe(self) -> str:
        return (
            f"projection saved {self.saved_tokens:,} tokens ({self.source_tokens:,} → "
            f"{self.projected_tokens:,}, stage {self.stage})"
        )


def context(conn: Connection, layout: Layout, agent_id: str) -> rm.AgentContext:
    agent = one(conn, "SELECT id, context_revision FROM agents WHERE id = :a", a=agent_id)
    if agent is None:
        raise NotFound(f"There is no agent with id {agent_id}.")
    groups = [
        rm.ContextGroup(
            g["id"], g["agent_id"], g["ordinal"], g["kind"], g["revision"], parse.time_of(g["created_at"])
        )
        for g in rows(
            conn, "SELECT * FROM context_turn_groups WHERE agent_id = :a ORDER BY ordinal", a=agent_id
        )
    ]
    items = rows(conn, f"{ITEM_SQL} WHERE agent_id = :a ORDER BY ordinal", a=agent_id)
    records = compaction_records(conn, layout, agent_id, items)
    covering = _covering(records, items)
    savings = projection_savings(conn, layout, agent_id)
    compactions = tuple(_compaction(r, savings) for r in records)
    return rm.AgentContext(
        agent_id,
        agent["context_revision"],
        DEFAULT_CONTEXT_BUDGET,
        tuple(groups),
        tuple(_item(i, covering.get(i["id"])) for i in items),
        compactions,
    )


def _item(i: dict[str, Any], covered_by: str | None) -> rm.ContextItem:
    return rm.ContextItem(
        i["id"],
        i["agent_id"],
        i["turn_group_id"],
        i["ordinal"],
        i["kind"],
        i["role"],
        i["content"],
        bool(i["visible"]),
        bool(i["locked"]),
        i["revision"],
        estimate_tokens(i["content"]),
        covered_by,
        i["id"] if i["kind"] == "compaction" else None,
        parse.time_of(i["created_at"]),
    )


def compaction_records(
    conn: Connection, layout: Layout, agent_id: str, items: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Each compaction item with its covered ids, focus and source revision (empty on 0.1.0)."""
    if items is None:
        items = rows(
            conn, f"{ITEM_SQL} WHERE agent_id = :a AND kind = 'compaction' ORDER BY ordinal", a=agent_id
        )
    details: dict[str, dict[str, Any]] = {}
    if layout.has("context_compactions"):
        details = {
            r["context_item_id"]: r
            for r in rows(
                conn,
                "SELECT cc.* FROM context_compactions cc JOIN context_items ci ON ci.id = cc.context_item_id "
                "WHERE ci.agent_id = :a",
                a=agent_id,
            )
        }
    records = []
    for item in (i for i in items if i["kind"] == "compaction"):
        found = details.get(item["id"], {})
        covered = parse.json_value(found.get("covered_item_ids_json"))
        records.append(
            {
                "id": item["id"],
                "agent_id": agent_id,
                "created_at": item["created_at"],
                "covered": tuple(str(c) for c in covered) if isinstance(covered, list) else (),
                "focus": found.get("focus") or "",
                "source_revision": found.get("source_revision", 0),
            }
        )
    return records


def _covering(records: list[dict[str, Any]], items: list[dict[str, Any]]) -> dict[str, str]:
    """Item → the first compaction (in context order) that covers it; nesting falls out of that."""
    present = {i["id"] for i in items}
    covering: dict[str, str] = {}
    for record in records:
        for item_id in record["covered"]:
            if item_id in present and item_id != record["id"]:
                covering.setdefault(item_id, record["id"])
    return covering


def covered_ids(conn: Connection, layout: Layout, agent_id: str) -> set[str]:
    return {i for r in compaction_records(conn, layout, agent_id) for i in r["covered"]}


def _compaction(record: dict[str, Any], savings: list[ProjectionSaving]) -> rm.Compaction:
    related = [s.describe() for s in savings if set(s.item_ids) & set(record["covered"])]
    focus = " · ".join([record["focus"], *related]) if record["focus"] else " · ".join(related)
    return rm.Compaction(
        record["id"],
        record["agent_id"],
        record["id"],
        record["covered"],
        focus,
        record["source_revision"],
        parse.time_of(record["created_at"]),
        "lensagent",
        None,
    )


def projection_savings(conn: Connection, layout: Layout, agent_id: str) -> list[ProjectionSaving]:
    if not layout.has("projection_decisions"):
        return []
    return [
        ProjectionSaving(
            p["id"],
            p["agent_id"],
            p["attempt_id"],
            p["stage"],
            p["source_tokens"],
            p["projected_tokens"],
            _named_items(parse.json_value(p["details_json"])),
            parse.time_of(p["created_at"]),
        )
        for p in rows(
            conn, "SELECT * FROM projection_decisions WHERE agent_id = :a ORDER BY created_at, id", a=agent_id
        )
    ]


def _named_items(details: Any) -> tuple[str, ...]:
    """Item ids a decision's details mention (any list of strings under a key naming items)."""
    if not isinstance(details, dict):
        return ()
    found: list[str] = []
    for key, value in details.items():
        if "item" in key and isinstance(value, list):
            found += [str(x) for x in value if isinstance(x, str)]
    return tuple(found)
