"""An imported agent's context rebuilt from its model calls: the same rows whatever order the calls came in.

An imported agent's context (the Context tab) is what its model calls were sent, read-only: each message
is an item the first time a call carries it, items numbered in call order, one turn (group) per call that
brought new items. Written in one go (`import`), calls come in time order and items are appended. The
receiver may see a later call first, or learn only afterwards that a call belongs to another agent (its
enclosing agent span came later). Appending then would number the items differently from `import`; so an
agent whose calls arrive out of order, or that gains or loses calls, has its context rebuilt here from all
of its calls in time order (start, span id), exactly as `import` numbers them. The messages are mapped again
from each span's stored attributes and events (`semconv.classify`), as `readback` does for "what the model
saw": same rendering, same item ids.

Imported agents' items are read-only (no operator edits to lose). On PostgreSQL a login below the owner may
not delete context rows (migration 0012): there the writer appends instead (`may_rebuild`).
"""

from __future__ import annotations

import json
import sys
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select

from agentdesk.store.ingest import messages as msgs
from agentdesk.store.ingest.prepare import AGENT_KEY, EXTRA_KEYS, ORPHAN_KEY, digest, item_id
from agentdesk.store.ingest.semconv import classify
from agentdesk.store.ingest.skeleton import json_field
from agentdesk.store.ingest.spans import OtelSpan, split_span_row_id
from agentdesk.store.persistence import schema as sc
from agentdesk.store.validation import estimate_tokens

IN_CHUNK = 500


CACHED_CALLS = 40_000
"""Calls whose messages are kept mapped (a receiver's process lives long; a children-first trace moves a call
between agents more than once, and mapping its messages again was most of the cost of a rebuild).

Large enough for the traces being received at once: a rebuild walks an agent's calls in time order, and an
LRU smaller than that walk misses on every call (4,000 here once mapped all 8,700 calls of a 20,000-span
trace's stand-in agent on every rebuild, 0.57 s of a 3.7 s write). The contents are interned: a call repeats
the conversation's earlier messages, so a cached call costs its tuples (~0.6 KB), not copies of its history."""
_mapped: OrderedDict[tuple[str, int, int], list[tuple[str, str, str]]] = OrderedDict()


def _key(row_id: str, attributes: str) -> tuple[str, int, int]:
    """The call's identity for the cache: its attributes without what the writer changes while it waits and
    moves (the agent it is filed under, the orphan marker placing removes). One entry for an orphan before
    and after it is placed: two were an LRU entry too many per call (a 20,000-span trace's rebuilds then
    missed on half their calls)."""
    attributes = _without(_without(attributes, AGENT_KEY), ORPHAN_KEY)
    return row_id, len(attributes), hash(attributes)


def _without(attributes: str, key: str) -> str:
    """`attributes` (JSON written by `PLAIN`: `add_keys` appends the writer's keys) without `key` and its string
    value, nor the separator beside it; unchanged when `key` is not there."""
    at = attributes.find(f'"{key}": "')
    if at < 0:
        return attributes
    end = attributes.find('"', at + len(key) + 5) + 1
    if attributes[at - 2:at] == ", ":
        at -= 2
    elif attributes[end:end + 2] == ", ":
        end += 2
    return attributes[:at] + attributes[end:]


def remember(row_id: str, attributes: str, messages: Sequence[tuple[str, str, str]]) -> None:
    """The writer hands in what `prepare` mapped for a call it stores, so a rebuild need not map it again."""
    _mapped[_key(row_id, attributes)] = [(role, sys.intern(content), kind) for role, content, kind in messages]
    while len(_mapped) > CACHED_CALLS:
        _mapped.popitem(last=False)


def messages_of(row_id: str, attributes: str) -> list[tuple[str, str, str]]:
    """(role, rendered content, item kind) of a stored model span's messages, inputs then outputs."""
    key = _key(row_id, attributes)
    if key in _mapped:
        _mapped.move_to_end(key)
        return _mapped[key]
    ids = split_span_row_id(row_id)
    if ids is None:
        return []
    attrs: dict[str, Any] = json.loads(attributes or "{}")
    events = attrs.get("otel.events")
    span = OtelSpan(ids[0], ids[1], None, "", 0, 1, 2, {k: v for k, v in attrs.items() if k not in EXTRA_KEYS},
                    events if isinstance(events, list) else [])
    c = classify(span)
    out = [(str(m.get("role") or "user"), text, msgs.item_kind(m)) for m, text in zip(
        c.input_messages + c.output_messages, c.input_rendered + c.output_rendered, strict=True)]
    remember(row_id, attributes, out)
    return out


def latest_turn(conn: Connection, agent: str) -> float | None:
    """When `agent`'s latest stored turn started: a call after it may simply append its new items (what
    rebuilding in time order would give too); one not after it means numbering again."""
    G = sc.ContextGroupRow
    value = conn.execute(select(func.max(G.created_at)).where(G.agent_id == agent)).scalar()
    return None if value is None else float(value)


def rebuild(conn: Connection, session_id: str, agents: Collection[str],
            known: Mapping[str, Sequence[str]] | None = None) -> None:
    """Delete `agents`' imported context and write it again from their calls (model spans of `session_id` whose
    `agentdesk.agent` names them), in time order. `known`: each agent's calls (span row ids), when the writer
    knows them all (a trace alone in its session, its skeleton kept): read by key, not found by extracting
    every model span's agent in the session."""
    agents = sorted(a for a in agents if a)
    if not agents:
        return
    S, R, It, G, V = sc.SpanRow, sc.RunRow, sc.ContextItemRow, sc.ContextGroupRow, sc.ContextItemRevisionRow
    calls: dict[str, list[tuple[int, str, str]]] = {a: [] for a in agents}
    if known is not None:
        for agent in agents:
            ids = list(known.get(agent, ()))
            for n in range(0, len(ids), IN_CHUNK):
                for row_id, started, attributes in conn.execute(
                        select(S.id, S.started_at, S.attributes).where(S.id.in_(ids[n:n + IN_CHUNK]))):
                    calls[agent].append((int(started), row_id, attributes))
    owner = json_field(conn, S.attributes, AGENT_KEY)
    for n in range(0, len(agents) if known is None else 0, IN_CHUNK):
        for row_id, started, attributes, agent in conn.execute(
                select(S.id, S.started_at, S.attributes, owner).join(R, R.id == S.run_id)
                .where(R.session_id == session_id, S.kind == "model", owner.in_(agents[n:n + IN_CHUNK]))):
            calls[str(agent)].append((int(started), row_id, attributes))
    for n in range(0, len(agents), IN_CHUNK):
        chunk = agents[n:n + IN_CHUNK]
        conn.execute(delete(V).where(V.item_id.in_(select(It.id).where(It.agent_id.in_(chunk)))))
        conn.execute(delete(It).where(It.agent_id.in_(chunk)))
        conn.execute(delete(G).where(G.agent_id.in_(chunk)))
    groups: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    revisions: list[dict[str, Any]] = []
    for agent in agents:
        seen: set[str] = set()
        position = ordinal = 0
        for start_ns, row_id, attributes in sorted(calls[agent]):
            at = start_ns / 1e9  # spans keep nanoseconds; context items keep seconds, as import writes them
            group = ""
            repeats: dict[tuple[str, str], int] = {}
            for role, content, kind in messages_of(row_id, attributes):
                k = repeats[(role, content)] = repeats.get((role, content), -1) + 1
                item = item_id(agent, role, content, k)
                if item in seen:
                    continue
                seen.add(item)
                if not group:
                    group, ordinal = "otg_" + digest(row_id), ordinal + 1
                    groups.append({"id": group, "agent_id": agent, "ordinal": ordinal, "kind": "turn", "revision": 1,
                                   "created_at": at})
                position += 1
                tokens = estimate_tokens(content)
                items.append({"id": item, "agent_id": agent, "group_id": group, "position": position, "kind": kind,
                              "role": role, "content": content, "visible": True, "locked": False, "revision": 1,
                              "token_estimate": tokens, "compaction_id": None, "summary_of": None,
                              "removed": False, "created_at": at})
                revisions.append({"item_id": item, "revision": 1, "content": content, "token_estimate": tokens,
                                  "created_at": at})
    for table, rows in ((G, groups), (It, items), (V, revisions)):
        if rows:
            conn.execute(insert(table), rows)
