"""A lensagent run's spans, derived: lensagent records no spans, so they are built from its rows.

Each run is one trace (reference §4.3):
- `run:<id>`      the run itself (kind agent), parent of
- `step:<id>`     each step (kind internal, "step N"), parent of
- `attempt:<id>`  each model attempt of the step (kind model; tokens from `usage_json`), parent of
- `call:<id>`     each tool call the attempt asked for (kind tool; a `parent_call_id` nests under its
                  parent call; a call without an attempt sits under its step), ending at its result;
- `gate:<id>`     the policy review of a call (kind gate): open while the call waits in
                  `policy_review`, closed when agentdesk recorded the decision time.
Compaction attempts have no step: they hang under the run whose time window holds them.
Start is `created_at`; end is the result's `created_at` for calls, else `updated_at` once the
row is TERMINAL (lensagent overwrites `updated_at` on every transition, so it is an end only then).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import NotFound
from agentdesk.store.readmodel import SpanTable
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources.lensagent import tree
from agentdesk.store.sources.lensagent import values as v
from agentdesk.store.sources.lensagent.layout import Layout
from agentdesk.store.sources.spantable import only
from agentdesk.store.sources.sql import rows

STEP_SQL = (
    "SELECT id, run_id, turn_group_id, ordinal, state, outcome, error_code, created_at, updated_at FROM steps"
)
ATTEMPT_COLUMNS = (
    "m.id, m.agent_id, m.step_id, m.kind, m.sequence, m.model, m.state, m.outcome, m.usage_json, "
    "m.error_code, m.context_revision, m.created_at, m.updated_at"
)


def call_columns(layout: Layout) -> str:
    return (
        "c.id, c.step_id, c.attempt_id, c.parent_call_id, c.capability_id, c.state, c.wait_reason, "
        "c.outcome, c.policy, c.effect, c.auto_review_passed, c.created_at, c.updated_at, "
        f"{layout.col('calls', 'auto_review_json', 'c')}, "
        "r.created_at AS result_at, r.outcome AS result_outcome"
    )


@dataclass(slots=True)
class Light:
    """One span without its large texts: what the waterfall needs."""

    id: str
    parent: str | None
    kind: str
    name: str
    status: str
    start: float
    end: float | None
    usage: rm.Usage


def run_trace(conn: Connection, layout: Layout, run_id: str) -> list[Light]:
    run = tree.run_row(conn, run_id)
    spans = [_run_light(run)]
    spans += [_step_light(step) for step in rows(conn, f"{STEP_SQL} WHERE run_id = :r", r=run_id)]
    attempts = rows(
        conn,
        f"SELECT {ATTEMPT_COLUMNS} FROM model_attempts m JOIN steps s ON s.id = m.step_id "
        "WHERE s.run_id = :r",
        r=run_id,
    )
    attempts += run_compactions(conn, run)
    spans += [_attempt_light(a, run_id) for a in attempts]
    calls = rows(
        conn,
        f"SELECT {call_columns(layout)} FROM calls c JOIN steps s ON s.id = c.step_id "
        "LEFT JOIN results r ON r.call_id = c.id WHERE s.run_id = :r",
        r=run_id,
    )
    for call in calls:
        spans.append(_call_light(call))
        gate = _gate_light(call)
        if gate is not None:
            spans.append(gate)
    spans.sort(key=lambda s: (s.start, s.id))
    return spans


def light(conn: Connection, layout: Layout, span_id: str) -> tuple[str, Light]:
    """One span's row and its run, without deriving the rest of the trace."""
    kind, native = split(span_id)
    run_id = span_run(conn, span_id)
    run = tree.run_row(conn, run_id)
    found: Light | None = None
    if kind == "run":
        found = _run_light(run)
    elif kind == "step":
        found = _step_light(rows(conn, f"{STEP_SQL} WHERE id = :i", i=native)[0])
    elif kind == "attempt":
        found = _attempt_light(
            rows(conn, f"SELECT {ATTEMPT_COLUMNS} FROM model_attempts m WHERE m.id = :i", i=native)[0], run_id
        )
    else:
        call = rows(
            conn,
            f"SELECT {call_columns(layout)} FROM calls c LEFT JOIN results r ON r.call_id = c.id "
            "WHERE c.id = :i",
            i=native,
        )[0]
        found = _call_light(call) if kind == "call" else _gate_light(call)
    if found is None:
        raise NotFound(f"There is no span with id {span_id}.")
    return run_id, found


def table(spans: list[Light]) -> SpanTable:
    return SpanTable(
        [s.id for s in spans],
        [s.parent for s in spans],
        [s.kind for s in spans],
        [s.name for s in spans],
        [s.status for s in spans],
        [s.start for s in spans],
        [s.end for s in spans],
        [s.usage.input_tokens for s in spans],
        [s.usage.output_tokens for s in spans],
        [0.0 for _ in spans],
    )


def run_compactions(conn: Connection, run: dict[str, Any]) -> list[dict[str, Any]]:
    """The agent's compaction attempts (no step) that ran while this run was live."""
    found = tree.compaction_attempts(conn, run["agent_id"], ATTEMPT_COLUMNS.replace("m.", ""))
    return [a for a in found if tree.window_run([run], run["agent_id"], a["created_at"]) == run["id"]]


def _run_light(run: dict[str, Any]) -> Light:
    """A run's own span is in progress until TERMINAL, whether it is READY, RUNNING or WAITING."""
    state = "RUNNING" if run["state"] in ("READY", "WAITING") else run["state"]
    return Light(
        f"run:{run['id']}",
        None,
        "agent",
        run["agent_name"],
        v.span_status(state, run["outcome"]),
        parse.epoch(run["created_at"]),
        _end(run["state"], run["updated_at"]),
        rm.Usage(),
    )


def _step_light(step: dict[str, Any]) -> Light:
    return Light(
        f"step:{step['id']}",
        f"run:{step['run_id']}",
        "internal",
        f"step {step['ordinal']}",
        v.span_status(step["state"], step["outcome"]),
        parse.epoch(step["created_at"]),
        _end(step["state"], step["updated_at"]),
        rm.Usage(),
    )


def _end(state: str | None, updated_at: object) -> float | None:
    return parse.epoch(updated_at) if state == "TERMINAL" else None


def _attempt_light(a: dict[str, Any], run_id: str) -> Light:
    parent = f"step:{a['step_id']}" if a["step_id"] else f"run:{run_id}"
    name = f"compaction · {a['model']}" if a["kind"] == "compaction" else f"{a['model']} #{a['sequence']}"
    return Light(
        f"attempt:{a['id']}",
        parent,
        "model",
        name,
        v.span_status(a["state"], a["outcome"]),
        parse.epoch(a["created_at"]),
        _end(a["state"], a["updated_at"]),
        v.usage_of(a["usage_json"]),
    )


def _call_light(c: dict[str, Any]) -> Light:
    if c["parent_call_id"]:
        parent = f"call:{c['parent_call_id']}"
    elif c["attempt_id"]:
        parent = f"attempt:{c['attempt_id']}"
    else:
        parent = f"step:{c['step_id']}"
    end: float | None
    if c["result_at"] is not None:
        status, end = v.OUTCOME_SPAN.get(c["result_outcome"], "ok"), parse.epoch(c["result_at"])
    else:
        status, end = v.span_status(c["state"], c["outcome"]), _end(c["state"], c["updated_at"])
    return Light(
        f"call:{c['id']}",
        parent,
        "tool",
        c["capability_id"],
        status,
        parse.epoch(c["created_at"]),
        end,
        rm.Usage(),
    )


def _gate_light(c: dict[str, Any]) -> Light | None:
    pending = c["state"] == "WAITING" and c["wait_reason"] == "policy_review"
    decided = operator_review(c["auto_review_json"])
    if not pending and decided is None:
        return None
    status, end = "running", None
    if not pending and decided is not None:
        status = "ok" if decided.get("approved") is True else "cancelled"
        end = parse.epoch(decided.get("decided_at"))
    return Light(
        f"gate:{c['id']}",
        f"call:{c['id']}",
        "gate",
        f"approval: {c['capability_id']}",
        status,
        parse.epoch(c["created_at"]),
        end,
        rm.Usage(),
    )


def operator_review(raw: str | None) -> dict[str, Any] | None:
    """The review record agentdesk writes on a decision (reviewer "operator"), else None."""
    if raw is None:
        return None
    review = parse.json_object(raw)
    return review if review.get("reviewer") == "operator" and review.get("decided_at") else None


def split(span_id: str) -> tuple[str, str]:
    kind, _, native = span_id.partition(":")
    if kind not in ("run", "step", "attempt", "call", "gate") or not native:
        raise NotFound(f"There is no span with id {span_id}.")
    return kind, native


def span_run(conn: Connection, span_id: str) -> str:
    """The run (trace) a span belongs to."""
    kind, native = split(span_id)
    if kind == "run":
        return native
    sql = {
        "step": "SELECT run_id FROM steps WHERE id = :i",
        "attempt": "SELECT s.run_id FROM model_attempts m LEFT JOIN steps s ON s.id = m.step_id "
        "WHERE m.id = :i",
        "call": "SELECT s.run_id FROM calls c JOIN steps s ON s.id = c.step_id WHERE c.id = :i",
        "gate": "SELECT s.run_id FROM calls c JOIN steps s ON s.id = c.step_id WHERE c.id = :i",
    }[kind]
    found = rows(conn, sql, i=native)
    if found and found[0]["run_id"]:
        return str(found[0]["run_id"])
    if kind == "attempt" and found:  # a compaction attempt: the run live when it ran
        attempt = rows(conn, "SELECT agent_id, created_at FROM model_attempts WHERE id = :i", i=native)[0]
        run = tree.window_run(
            tree.agent_runs(conn, attempt["agent_id"]), attempt["agent_id"], attempt["created_at"]
        )
        if run is not None:
            return run
    raise NotFound(f"There is no span with id {span_id}.")


SUBSET_LIMIT = 200
"""Up to this many changed spans are derived one by one; a bigger batch derives the run once and narrows it."""


def span_table(conn: Connection, layout: Layout, run_id: str, span_ids: Sequence[str] | None) -> SpanTable:
    """The run's derived spans; with `span_ids` just those of them (ids of other runs or none skipped)."""
    if span_ids is None or len(span_ids) > SUBSET_LIMIT:
        return only(table(run_trace(conn, layout, run_id)), span_ids)
    found = []
    for span_id in dict.fromkeys(span_ids):
        try:
            owner, row = light(conn, layout, span_id)
        except (NotFound, IndexError):  # gone, malformed, or a call with no gate
            continue
        if owner == run_id:
            found.append(row)
    found.sort(key=lambda s: (s.start, s.id))
    return table(found)
