"""An operator stops a lensagent run, the way lensagent ends one itself (reference §2.1): one guarded transaction.

lensagent has no paused state and no stop request an agent reads: it ends a run from inside its own process
(`interruptCall` / `interruptProjectCalls`). A stop written here does the same rows, under `BEGIN IMMEDIATE`:

- every non-terminal call of the run → `TERMINAL`, outcome `interrupted`, `wait_reason` cleared, `outcome_unknown=1`
  if it was `RUNNING` (its tool may have acted), plus a `results` row (outcome `interrupted`, error code
  `operator_stopped`, the message naming the operator and the reason);
- the run's open steps and their open model attempts → `TERMINAL` `interrupted` (`operator_stopped`);
- the run → `TERMINAL` `cancelled`, `error_code='operator_stopped'`, so `one_live_run_per_agent` frees the agent;
- the agent `RUNNING`/`WAITING` → `IDLE` (run terminal); `IDLE` and `STOPPED` stay;
- who and why, for the run as a whole: an `ingress_requests` row (`client_id='agentdesk'`, operation `stopRun`),
  the table lensagent keeps for commands from outside clients; `run_control` reads it back;
- `instance.state_revision` + 1.

Every row is compare-and-set on the state (and revision) it was read at; a row that moved raises `StaleRevision`
and the transaction rolls back. A terminal run is refused in one sentence (`RunFinished`). What a direct write
cannot do is tell a running lensagent process (its EventBus is in-process) or append to its EventLog: the source's
notes say so, and the process may still be working when its rows say it stopped.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import Connection, text

from agentdesk.store.control.commands import RunFinished
from agentdesk.store.errors import NotFound, StaleRevision
from agentdesk.store.ids import new_id
from agentdesk.store.persistence.bus import Change
from agentdesk.store.readmodel import ControlState, RunControl
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources.lensagent import stopped
from agentdesk.store.sources.lensagent.layout import Layout
from agentdesk.store.sources.lensagent.writes import ORIGIN, agent_parents, bump_instance
from agentdesk.store.sources.sql import one, rows

ERROR_CODE = "operator_stopped"
LIVE_AGENT = ("RUNNING", "WAITING")
CALLS_OF_RUN = """WITH RECURSIVE of_run(id) AS (
  SELECT c.id FROM calls c JOIN steps s ON s.id = c.step_id WHERE s.run_id = :r
  UNION SELECT c.id FROM calls c JOIN of_run p ON c.parent_call_id = p.id)"""
"""The run's calls: those of its steps, and their sub-calls (`parent_call_id`), which may carry no step."""


def _run(conn: Connection, sql: str, **params: Any) -> int:
    return int(conn.execute(text(sql), params).rowcount)  # type: ignore[attr-defined]


def message(actor: str, reason: str | None) -> str:
    """interruptCall's `message`: who stopped the run and why."""
    return f"Stopped by operator {actor}" + (f": {reason}" if reason else "")


def stop_run(conn: Connection, layout: Layout, run_id: str, actor: str,
             reason: str | None) -> tuple[RunControl, list[Change]]:
    """End `run_id` cancelled (its open calls, steps and attempts interrupted); the changes to publish after commit."""
    run = one(conn, "SELECT id, agent_id, state, outcome, revision FROM runs WHERE id = :r", r=run_id)
    if run is None:
        raise NotFound(f"There is no run with id {run_id}.")
    if run["state"] == "TERMINAL":
        raise RunFinished(f"Run {run_id} has already finished ({run['outcome'] or 'terminal'}); there is nothing "
                          "to stop.")
    now = parse.iso_now()
    said = message(actor, reason)
    calls = rows(conn, f"{CALLS_OF_RUN} SELECT id, state, wait_reason, revision FROM calls WHERE id IN "
                       "(SELECT id FROM of_run) AND state != 'TERMINAL' ORDER BY created_at, id", r=run_id)
    for call in calls:
        _interrupt_call(conn, layout, call, ERROR_CODE, said, now)
    steps = rows(conn, "SELECT id, state FROM steps WHERE run_id = :r AND state != 'TERMINAL'", r=run_id)
    attempts = rows(conn, "SELECT m.id, m.state FROM model_attempts m JOIN steps s ON s.id = m.step_id "
                          "WHERE s.run_id = :r AND m.state != 'TERMINAL'", r=run_id)
    for attempt in attempts:  # transitionAttempt(from, to): compare-and-set on the state it was read in
        _one(conn, "UPDATE model_attempts SET state = 'TERMINAL', outcome = 'interrupted', error_code = :code, "
                   "updated_at = :now WHERE id = :i AND state = :was", f"Model attempt {attempt['id']}",
             code=ERROR_CODE, now=now, i=attempt["id"], was=attempt["state"])
    for step in steps:  # steps keep no revision: compare-and-set on the state
        _one(conn, "UPDATE steps SET state = 'TERMINAL', outcome = 'interrupted', error_code = :code, "
                   "updated_at = :now WHERE id = :i AND state = :was", f"Step {step['id']}",
             code=ERROR_CODE, now=now, i=step["id"], was=step["state"])
    _one(conn, "UPDATE runs SET state = 'TERMINAL', outcome = 'cancelled', error_code = :code, "
               "initial_step_pending = 0, revision = revision + 1, updated_at = :now "
               "WHERE id = :r AND state = :was AND revision = :rev", f"Run {run_id}",
         code=ERROR_CODE, now=now, r=run_id, was=run["state"], rev=run["revision"])
    agent = one(conn, "SELECT id, state, revision FROM agents WHERE id = :a", a=run["agent_id"])
    if agent is not None and agent["state"] in LIVE_AGENT:  # RUNNING/WAITING → IDLE (run terminal)
        _one(conn, "UPDATE agents SET state = 'IDLE', revision = revision + 1, updated_at = :now "
                   "WHERE id = :a AND state = :was AND revision = :rev", f"Agent {agent['id']}",
             now=now, a=agent["id"], was=agent["state"], rev=agent["revision"])
    _record(conn, layout, run_id, actor, reason, now, [c["id"] for c in calls])
    bump_instance(conn, layout)
    return (RunControl(run_id, ControlState.STOPPED, actor, parse.epoch(now), reason),
            _changes(conn, run_id, run["agent_id"], run["revision"] + 1, calls, steps, attempts))


def _interrupt_call(conn: Connection, layout: Layout, call: dict[str, Any], code: str, said: str, now: str) -> None:
    """interruptCall(errorCode, message): TERMINAL `interrupted`; `outcome_unknown=1` if it was RUNNING [inferred:
    the reference's transition, §2.1]. The results row is [inferred] too: `calls` has no column for the errorCode
    and message interruptCall takes, and `results` (error_code, error_message, outcome `interrupted`) is the one
    place lensagent keeps them; a call's result row exists once it is terminal with a result (§2.1)."""
    was_running = call["state"] == "RUNNING"
    _one(conn, "UPDATE calls SET state = 'TERMINAL', wait_reason = NULL, outcome = 'interrupted', "
               "outcome_unknown = CASE WHEN :running THEN 1 ELSE outcome_unknown END, revision = revision + 1, "
               "updated_at = :now WHERE id = :i AND state = :was AND revision = :rev", f"Call {call['id']}",
         running=int(was_running), now=now, i=call["id"], was=call["state"], rev=call["revision"])
    if one(conn, "SELECT 1 AS x FROM results WHERE call_id = :i", i=call["id"]) is not None:
        return  # a non-terminal call with a result already is odd data; its result is kept as it is
    row: dict[str, Any] = {
        "id": new_id("res"), "call_id": call["id"], "outcome": "interrupted",
        "content_json": json.dumps(said, ensure_ascii=False), "truncated": 0, "error_code": code,
        "error_message": said, "created_at": now,
    }
    if layout.has("results", "capture"):  # a running tool may have acted: what it captured is unknown
        row |= {"capture": "unknown" if was_running else "complete", "stored": "full"}
    _run(conn, f"INSERT INTO results ({', '.join(row)}) VALUES ({', '.join(':' + k for k in row)})", **row)


def _one(conn: Connection, sql: str, what: str, **params: Any) -> None:
    if _run(conn, sql, **params) != 1:  # cannot happen under BEGIN IMMEDIATE unless the row moved meanwhile
        raise StaleRevision(f"{what} changed while the run was being stopped; reload and try again.")


def _record(conn: Connection, layout: Layout, run_id: str, actor: str, reason: str | None, now: str,
            call_ids: list[str]) -> None:
    """Who stopped the run and why, where lensagent keeps outside clients' commands (`ingress_requests`)."""
    if not layout.has("ingress_requests"):
        return
    request = {"operation": stopped.OPERATION, "run_id": run_id, "actor": actor, "reason": reason}
    body = json.dumps(request, ensure_ascii=False, sort_keys=True)
    response = {"run_id": run_id, "outcome": "cancelled", "stopped_by": actor, "reason": reason, "stopped_at": now,
                "interrupted_calls": call_ids}
    _run(conn, "INSERT OR REPLACE INTO ingress_requests (client_id, key, operation, request_digest, response_json, "
               "created_at) VALUES (:c, :k, :o, :d, :r, :now)", c=stopped.CLIENT, k=stopped.key_of(run_id),
         o=stopped.OPERATION, d="sha256:" + hashlib.sha256(body.encode()).hexdigest(),
         r=json.dumps(response, ensure_ascii=False), now=now)


def run_control(conn: Connection, layout: Layout, run_id: str) -> RunControl:
    """The run's control as agentdesk recorded it: stopped by whom (`ingress_requests`), else running."""
    if (found := stopped.stops(conn, [run_id]).get(run_id)) is not None:
        return found
    if one(conn, "SELECT 1 AS x FROM runs WHERE id = :r", r=run_id) is None:
        raise NotFound(f"There is no run with id {run_id}.")
    return RunControl(run_id, ControlState.RUNNING)


def _changes(conn: Connection, run_id: str, agent_id: str, revision: int, calls: list[dict[str, Any]],
             steps: list[dict[str, Any]], attempts: list[dict[str, Any]]) -> list[Change]:
    parents = agent_parents(conn, agent_id) | {"agent": agent_id}
    in_run = parents | {"run": run_id}
    found = [Change("run", "update", run_id, parents, revision, origin=ORIGIN),
             Change("agent", "update", agent_id, agent_parents(conn, agent_id), origin=ORIGIN)]
    for call in calls:
        found.append(Change("span", "update", f"call:{call['id']}", in_run, origin=ORIGIN))
        if call["wait_reason"] == "policy_review":
            found += [Change("approval", "update", call["id"], in_run, call["revision"] + 1, origin=ORIGIN),
                      Change("span", "update", f"gate:{call['id']}", in_run, origin=ORIGIN)]
        elif call["wait_reason"] == "user_input":
            found.append(Change("ask", "update", call["id"], in_run, call["revision"] + 1, origin=ORIGIN))
    found += [Change("span", "update", f"step:{s['id']}", in_run, origin=ORIGIN) for s in steps]
    found += [Change("span", "update", f"attempt:{a['id']}", in_run, origin=ORIGIN) for a in attempts]
    return found
