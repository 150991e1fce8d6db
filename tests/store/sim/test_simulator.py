"""The live simulator and the bulk generator: realistic, consistent, deterministic content.

The simulator tests run it fast (`speed` divides every simulated duration) while
a test "operator" approves, denies or ignores what the agents ask, and then read
back what the agents wrote through the runtime API.
"""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from agentdesk.store.errors import Expired
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.sim.content import ContentGenerator
from agentdesk.store.sim.generator import populate_bulk
from agentdesk.store.sim.player import SimEvent, Simulator
from tests.conftest import dump, prebuilt
from tests.waiting import eventually, wait_until

Row = dict[str, object]


def rows(store: Store, table: type[sc.Base]) -> list[Row]:
    with store.reading() as session:
        return [dict(r._mapping) for r in session.execute(select(table.__table__))]  # type: ignore[attr-defined]


def wait_for(condition: Callable[[], bool], timeout_s: float) -> bool:
    """True once `condition` holds; a hang fails the test (tests/waiting.py) after `timeout_s`."""
    wait_until(condition, timeout_s=timeout_s)
    return True


def assert_spans_are_well_nested(spans: list[Row]) -> int:
    """Every parent exists in the same run and starts no later than its child; returns the deepest level."""
    by_id = {s["id"]: s for s in spans}
    deepest = 0
    for span in spans:
        depth, node = 0, span
        while node["parent_span_id"] is not None:
            parent = by_id[node["parent_span_id"]]
            assert parent["run_id"] == node["run_id"]
            assert parent["started_at"] <= node["started_at"]  # type: ignore[operator]
            node, depth = parent, depth + 1
        deepest = max(deepest, depth)
    return deepest


class Operator:
    """Decides approvals as they appear: approve (edited) the first, deny the second, ignore the rest."""

    def __init__(self, store: Store) -> None:
        self.source = NativeSource(store)
        self.approved: str | None = None
        self.denied: str | None = None
        self.waiting_seen: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.wait(0.02):
            for approval in self.source.approvals("pending"):
                if approval.id in (self.approved, self.denied):
                    continue
                if self.source.run(approval.run_id).status == "waiting":
                    self.waiting_seen.add(approval.run_id)
                # An approval may expire between the listing and the decision (its 0.6 s goes fast on
                # a busy machine): the store refuses that decision, as it must, and the operator
                # takes the next one, as a person would
                with contextlib.suppress(Expired):
                    if self.approved is None:
                        edited = json.dumps({**json.loads(approval.arguments), "dry_run": True})
                        self.source.decide(approval.id, True, "alice", edited_arguments=edited)
                        self.approved = approval.id
                    elif self.denied is None:
                        self.source.decide(approval.id, False, "bob", "touches production")
                        self.denied = approval.id


def played_out(store: Store, *approval_ids: str | None) -> bool:
    """Each decided approval's tool call has finished, whatever the decision, and each expiry failed its run."""
    tools = {json.loads(str(s["attributes"])).get("approval_id"): s["status"]
             for s in rows(store, sc.SpanRow) if s["kind"] == "tool"}
    runs = {r["id"]: r["status"] for r in rows(store, sc.RunRow)}
    expired = [a["run_id"] for a in rows(store, sc.ApprovalRow) if a["status"] == "expired"]
    return (all(tools.get(a) not in (None, "running") for a in approval_ids)
            and all(runs.get(run_id) == "failed" for run_id in expired))  # an expiry fails its run


def test_agents_work_live_and_operators_steer_them(store: Store) -> None:
    published: list[int] = []
    store.bus.subscribe(lambda batch: published.append(len(batch)))
    operator = Operator(store)
    sim = Simulator(store, agents=3, seed=5, speed=40, approval_timeout_s=0.6, approval_rate=1.0,
                    error_rate=0.3)
    operator.thread.start()
    sim.start()
    try:
        def done() -> bool:
            approvals = rows(store, sc.ApprovalRow)
            return operator.denied is not None and any(a["status"] == "expired" for a in approvals)
        assert wait_for(done, 20), "the simulator never produced an approve, a deny and an expiry"
        assert wait_for(lambda: played_out(store, operator.approved, operator.denied), 20), \
            "the approved, denied and expired calls never played out"
    finally:
        operator.stop.set()
        sim.stop()
        operator.thread.join()
    assert sim.failures == [] and not sim.running
    spans, runs = rows(store, sc.SpanRow), {r["id"]: r for r in rows(store, sc.RunRow)}
    approvals = {a["id"]: a for a in rows(store, sc.ApprovalRow)}

    assert assert_spans_are_well_nested(spans) >= 2  # agent > model > tool/gate
    assert {"agent", "model", "tool", "gate"} <= {s["kind"] for s in spans}
    assert any(s["status"] == "error" for s in spans)
    assert not [s for s in spans if s["status"] == "running"], "stop() left spans open"
    assert all(r["status"] in ("done", "failed", "cancelled") for r in runs.values())
    assert operator.waiting_seen, "a run waiting for a human never showed status 'waiting'"

    def tool_span(approval_id: str) -> Row:
        [span] = [s for s in spans if s["kind"] == "tool"
                  and json.loads(str(s["attributes"])).get("approval_id") == approval_id]
        return span

    assert operator.approved and operator.denied
    approved = tool_span(operator.approved)
    attrs = json.loads(str(approved["attributes"]))
    assert attrs["edited"] is True and attrs["arguments"]["dry_run"] is True  # ran with the operator's edit
    assert not str(approved["error"] or "").startswith("Denied")
    denied = tool_span(operator.denied)
    assert denied["status"] == "error" and denied["error"] == "Denied by bob: touches production"
    # An expiry fails its run. One that came while `stop()` ended the simulator is the exception: its agent was
    # stopped while it waited (0.6 s deadlines; on a loaded machine one can pass between the check above and
    # the stop), and a stopped run ends cancelled, whatever its request's fate. The check above saw at least
    # one expiry fail its run before the stop.
    expired = [a for a in approvals.values() if a["status"] == "expired"]
    ended = [runs[a["run_id"]] for a in expired]
    assert any(r["status"] == "failed" for r in ended)
    assert all((r["status"], r["error"]) in (("failed", "approval expired"), ("cancelled", None)) for r in ended)
    assert sum(published) > 50 and NativeSource(store).verify().ok


def test_agents_delegate_to_sub_agents(store: Store) -> None:
    sim = Simulator(store, agents=2, seed=1, speed=200, approval_rate=0.0).start()
    try:
        assert wait_for(lambda: any(e.kind == "sub_agent" for e in sim.events), 15)
    finally:
        sim.stop()
    agents = {a["id"]: a for a in rows(store, sc.AgentRow)}
    subs = [a for a in agents.values() if a["parent_agent_id"] is not None]
    assert subs and all(agents[str(s["parent_agent_id"])]["session_id"] == s["session_id"] for s in subs)
    delegations = [s for s in rows(store, sc.SpanRow) if s["kind"] == "sub_agent"]
    sub_ids = {json.loads(str(s["attributes"]))["agent_id"] for s in delegations}
    assert sub_ids <= {str(s["id"]) for s in subs}
    sub_runs = [r for r in rows(store, sc.RunRow) if r["agent_id"] in sub_ids]
    assert sub_runs, "a sub-agent span without a run of the sub-agent"


def tool_sequence(path: Path, seed: int) -> dict[int, list[tuple[str, str | None, str | None]]]:
    """Per agent thread: the (agent, tool, arguments) it chose, from a fresh store."""
    store = open_store(str(path))
    try:
        sim = Simulator(store, agents=2, seed=seed, speed=300, approval_rate=0.0).start()

        def enough() -> bool:
            tools = Counter(e.worker for e in sim.events if e.kind == "tool")
            return min(tools[0], tools[1]) >= 8
        wait_for(enough, 15)
        sim.stop()
        assert sim.failures == []
        events: list[SimEvent] = sim.events
    finally:
        store.close()
    sequences: dict[int, list[tuple[str, str | None, str | None]]] = {0: [], 1: []}
    for event in events:
        if event.kind == "tool":
            sequences[event.worker].append((event.agent, event.tool, event.arguments))
    return sequences


def test_same_seed_same_content(tmp_path: Path) -> None:
    first, second = tool_sequence(tmp_path / "a.sqlite", 11), tool_sequence(tmp_path / "b.sqlite", 11)
    other = tool_sequence(tmp_path / "c.sqlite", 12)
    for worker in (0, 1):
        common = min(len(first[worker]), len(second[worker]))
        assert common >= 8
        assert first[worker][:common] == second[worker][:common]
        assert first[worker][:common] != other[worker][:common]


def test_stop_is_prompt_and_closes_what_was_open(store: Store) -> None:
    sim = Simulator(store, agents=3, seed=2, speed=1.0).start()  # real-time: model calls take seconds
    assert wait_for(lambda: len(rows(store, sc.SpanRow)) >= 3, 5)
    stopper = threading.Thread(target=sim.stop)
    stopper.start()
    stopper.join(60)  # a guard against a hang, not a speed target
    assert not stopper.is_alive() and not sim.running
    assert all(s["status"] != "running" for s in rows(store, sc.SpanRow))
    assert {r["status"] for r in rows(store, sc.RunRow)} <= {"done", "failed", "cancelled"}
    assert all(s["status"] != "running" for s in rows(store, sc.SessionRow))


def test_a_crowd_stops_at_its_deadline_and_leaves_nothing_open(tmp_path: Path) -> None:
    """Hundreds of agents queue for the one write lock; at the deadline none of them may go on writing.

    Each agent that opened a session closes it in one transaction; an agent still queued writes nothing.
    So the transactions after the deadline number at most the sessions opened (plus a few racing it):
    closing step by step, or agents writing the session they queued for, would need several per session.
    """
    store = open_store(str(prebuilt(tmp_path / "crowd.sqlite")))
    try:
        began = time.time()
        sim = Simulator(store, agents=300, seed=4, duration_s=1.0, approval_rate=0.0).start()
        assert sim.wait(120)  # a guard against a hang, not a speed target
        sim.stop(0)  # nothing left to wait for
        assert not sim.running and sim.failures == []
        sessions = rows(store, sc.SessionRow)
        assert sessions, "no agent got to write before the deadline"
        assert all(s["status"] not in ("running", "waiting") for s in sessions)
        assert {r["status"] for r in rows(store, sc.RunRow)} <= {"done", "failed", "cancelled"}
        assert all(s["status"] != "running" for s in rows(store, sc.SpanRow))
        # one `at` per transaction (taken holding the lock); the deadline came a little after began + 1.0
        after = {c["at"] for c in rows(store, sc.ChangeRow) if float(str(c["at"])) > began + 1.0}
        assert len(after) <= len(sessions) + 3
        assert NativeSource(store).verify().ok
    finally:
        store.close()


def test_content_is_a_function_of_the_seed() -> None:
    def sample(seed: int) -> list[object]:
        gen = ContentGenerator(random.Random(seed))
        return [gen.project_name(), gen.task_title(), gen.agent(), gen.tool_call(), gen.model_duration(),
                gen.model_usage("gpt-4.1", 1000)]

    assert sample(4) == sample(4) and sample(4) != sample(5)
    gen = ContentGenerator(random.Random(0))
    outputs = [gen.tool_output(gen.tool_call()) for _ in range(300)]
    assert any("<script>" in text for text in outputs) and any(not text.isascii() for text in outputs)


# -- bulk ----------------------------------------------------------------------------------
SMALL = dict(projects=3, runs=3_000, big_run_spans=4_000, detailed_runs=40, pending_approvals=5,
             decided_approvals=10, context_turns=12, now=1_790_000_000.0)


def test_populate_bulk_is_consistent(store: Store, store_path: Path) -> None:
    result = populate_bulk(store, seed=3, **SMALL)  # type: ignore[arg-type]
    runs = {r["id"]: r for r in rows(store, sc.RunRow)}
    spans = rows(store, sc.SpanRow)
    big = [s for s in spans if s["run_id"] == result.big_run_id]
    assert len(runs) == 3_000 and len(big) == 4_000
    conn = sqlite3.connect(store_path)
    try:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()

    assert assert_spans_are_well_nested(spans) >= 4
    assert {"agent", "model", "tool", "sub_agent", "guardrail", "gate"} <= {s["kind"] for s in big}
    for span in big:
        if span["ended_at"] is not None:
            assert span["ended_at"] >= span["started_at"]  # type: ignore[operator]
    assert 0.003 <= sum(s["status"] == "error" for s in big) / len(big) <= 0.03
    running = [s["id"] for s in big if s["status"] == "running"]
    assert 2 <= len(running) <= 15 and set(running) <= set(result.running_span_ids)
    big_run = runs[result.big_run_id]
    assert big_run["status"] == "running" and big_run["ended_at"] is None
    assert big_run["input_tokens"] == sum(s["input_tokens"] for s in big)  # type: ignore[misc]

    per_agent = Counter(r["agent_id"] for r in runs.values())
    assert per_agent.most_common(1)[0] == (result.busy_agent_id, per_agent[result.busy_agent_id])
    assert per_agent[result.busy_agent_id] >= 0.5 * len(runs)
    per_project = Counter(r["project_id"] for r in runs.values())
    assert per_project.most_common(1)[0][0] == result.busiest_project_id

    source = NativeSource(store)
    assert {a.id for a in source.approvals("pending")} == set(result.pending_approval_ids)
    assert all(runs[a.run_id]["status"] == "waiting" for a in source.approvals("pending"))
    assert len(source.approvals("all")) == 15 and source.verify().ok
    agents = rows(store, sc.AgentRow)
    assert {a["status"] for a in agents} >= {"running", "waiting"}
    for agent in agents:
        context = source.context(str(agent["id"]))
        assert context.context_revision == len(context.items) > 0
    snapshot = [s for s in big if s["context_revision"] is not None][-1]
    assert len(source.sent_context(str(snapshot["id"]))) == snapshot["context_revision"]
    assert len(source.span_table(result.big_run_id)) == 4_000
    assert result.counts["runs"] == 3_000


def test_populate_bulk_is_deterministic(tmp_path: Path) -> None:
    dumps = []
    for name in ("one", "two"):
        store = open_store(str(tmp_path / f"{name}.sqlite"))
        try:
            populate_bulk(store, seed=9, **dict(SMALL, runs=500, big_run_spans=500))  # type: ignore[arg-type]
        finally:
            store.close()
        dumps.append([_without_identity(line) for line in dump(tmp_path / f"{name}.sqlite")])
    assert dumps[0] == dumps[1]


def _without_identity(line: str) -> str:
    """Each store has its own id and audit key (docs/audit.md): equal data, different id and MACs."""
    if line.startswith('INSERT INTO "agentdesk_meta" VALUES(\'store_id\''):
        return "store_id"
    if line.startswith('INSERT INTO "agentdesk_meta" VALUES(\'audit_key.'):  # the key's fingerprint
        return "audit_key"
    if line.startswith('INSERT INTO "audit_log"'):
        return line.rsplit(",", 1)[0]
    return line


@pytest.mark.slow
def test_populate_bulk_at_benchmark_size_is_quick(store: Store) -> None:
    """The benchmark store: 100,000 runs and a run of 100,000 nested spans (its speed is bench/'s concern)."""
    result = populate_bulk(store, seed=0)
    counts = store.info().counts
    assert counts["runs"] == 100_000
    assert len(NativeSource(store).span_table(result.big_run_id)) == 100_000


def test_simulated_agents_honour_pause_resume_and_stop_at_their_checkpoints(store: Store) -> None:
    """The demo's agents call the checkpoint at every step: a paused run blocks (reported held), a resumed one
    goes on, a stopped one ends cancelled, naming who stopped it."""
    from agentdesk.store.control import commands as control
    from agentdesk.store.control.checkpoint import read_control
    from agentdesk.store.errors import Conflict

    sim = Simulator(store, agents=1, seed=3, speed=200, approval_rate=0.0).start()
    try:
        def hold(action: Callable[[str], object]) -> str | None:
            """Apply `action` to the newest run still going (None while there is none it applies to)."""
            live = [e.entity_id for e in sim.events if e.kind == "run_started"
                    and not any(f.kind == "run_finished" and f.entity_id == e.entity_id for f in sim.events)]
            for run_id in reversed(live):
                assert run_id is not None
                with contextlib.suppress(Conflict):
                    action(run_id)
                    return run_id
            return None

        def ended(run_id: str) -> bool:
            return NativeSource(store).run(run_id).status in ("done", "failed", "cancelled")

        for _ in range(20):  # a run paused or stopped during its last step ends by itself first: take another
            paused = eventually(lambda: hold(lambda r: control.pause(store, r, "alice")), what="a run paused")
            wait_until(lambda run=paused: read_control(store, run).held or ended(run), what="the agent held")
            if read_control(store, paused).held:
                control.resume(store, paused, "alice")
                break
        else:
            pytest.fail("no paused run was ever held at a checkpoint")
        for _ in range(20):
            stopped = eventually(lambda: hold(lambda r: control.stop(store, r, "bob", "demo over")), what="a stop")
            wait_until(lambda run=stopped: ended(run), what="the stopped run ended")
            if NativeSource(store).run(stopped).status == "cancelled":
                break
        else:
            pytest.fail("no stopped run was ever cancelled at a checkpoint")
    finally:
        sim.stop()
    assert NativeSource(store).run(stopped).error == "stopped by bob: demo over"
