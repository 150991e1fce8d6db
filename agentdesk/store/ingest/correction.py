"""The late-parent correction: a write to a trace already stored decides over the whole trace again, and
corrects what the stored spans were given, in the same transaction that brings the new ones.

Why: a live exporter sends a span when it ends, so children come before their parent and a trace arrives
in many requests. A nested agent span written before its enclosing one was taken for a top-level `agent`
with an agent row of its own, a model call was filed under the agent known then (or the stand-in named
after the service), the run under the outermost agent of the first request, the run in a session of its
own until the conversation id (on the agent span, which ends last) arrived. `import` sees each trace
whole; so that `receive` ends with the same rows, each stored span gets what `import` gives it, agents
nothing derives any more go, and a run whose conversation came late moves to its session. See
docs/otel.md ("Whatever order and batching the spans arrive in").

The stored spans' skeleton (`skeleton`) is what the decision reads: kept by this process between writes
of the trace (`skeleton_cache`), read from the store only when this process did not write the trace's
last revision. Every correction is a compare-and-set on the value read.
"""

from __future__ import annotations

import json
from contextlib import suppress
from dataclasses import replace
from typing import Any

from sqlalchemy import bindparam, delete, event, func, select, update

from agentdesk.store.ingest import skeleton
from agentdesk.store.ingest.messages import PLAIN
from agentdesk.store.ingest.outbox import is_postgres
from agentdesk.store.ingest.placement import AgentPlacement
from agentdesk.store.ingest.prepare import AGENT_KEY, Prepared, digest
from agentdesk.store.ingest.rows import IN_CHUNK
from agentdesk.store.ingest.skeleton_cache import Skeleton, cache_of
from agentdesk.store.ingest.spans import span_row_id, split_span_row_id
from agentdesk.store.ingest.trace_index import IndexEntry, TraceIndex
from agentdesk.store.ingest.trace_write import IMPORTED_AGENT_PREFIX
from agentdesk.store.persistence import schema as sc
from agentdesk.store.uow import UnitOfWork


class LateParentCorrection(AgentPlacement):
    """Reads a stored trace's skeleton into the index, then retypes, refiles and drops what it changed."""

    def __init__(self, uow: UnitOfWork, index: TraceIndex, default_project: str | None, *,
                 staged: bool = False, resources: set[str] | None = None) -> None:
        super().__init__(uow, index, default_project, staged=staged, resources=resources)
        self._kept: Skeleton | None = None
        """The stored skeleton as this write leaves it, kept for the trace's next write after the commit
        (`skeleton_cache`); None when there is nothing to keep (a new run, a staged write)."""
        self._shared: bool | None = None
        """Whether other traces share this trace's session (asked once, `_session_shared`)."""
        self._old_session: str | None = None
        """The session a stored run left for the one its conversation names (`_move_session`)."""

    def _load_skeleton(self) -> None:
        """A trace stored before: its spans' skeleton joins the index, so placing decides over the whole trace
        (what `import` decides) rather than over this request's part of it. The skeleton this process kept
        after the trace's last write, if that write is still the last one (`skeleton_cache`), else read."""
        revision = self._probe.revision if self._probe is not None else None
        kept = None if self.staged else cache_of(self.uow.store).get(self.run_id, revision)
        if kept is None:
            kept = {st.span_id: st for st in skeleton.load(self.conn, self.run_id)}
        self._skeleton = list(kept.values())
        if not self.staged and revision is not None:
            self._kept = kept
            event.listen(self.uow.session, "after_commit", self._keep_skeleton(revision + 1), once=True)
        spans, index = self.index.spans, self.index
        for st in self._skeleton:  # `index.note` for each, called only where it decides more than the entry
            if st.span_id not in spans:
                if st.parent_id is None or (st.conversation and index.conversation is None):
                    index.note(st.span_id, st.parent_id, st.agent_key, st.agent_name, st.start_ns, None,
                               st.conversation, st.name)
                else:
                    spans[st.span_id] = IndexEntry(st.parent_id, st.agent_key, st.agent_name, st.start_ns)

    def forget_kept(self) -> None:
        """A new run under a trace id this process may have kept (the run was deleted since): its revisions
        start again, so what was kept must not match one of them."""
        if not self.staged:
            cache_of(self.uow.store).forget(self.run_id)

    def _keep_skeleton(self, revision: int) -> Any:
        """After the commit only (a rolled-back write keeps nothing): the skeleton as stored at `revision`,
        the run's revision once this write's roll-up has bumped it."""
        store, run_id = self.uow.store, self.run_id

        def keep(_session: Any) -> None:
            # the write is committed: nothing here may make it look failed (an entry not kept is only read again)
            with suppress(Exception):
                if self._kept is not None:
                    cache_of(store).keep(run_id, revision, self._kept)
                else:
                    cache_of(store).forget(run_id)
        return keep

    def _track(self, sp: Prepared, kind: str, attributes: str) -> None:
        """A span this write stores, as `skeleton.load` would read it back (see `_kept`)."""
        if self._kept is not None:
            self._kept[sp.span_id] = skeleton.of_row(self.index.trace_id, sp.span_id, sp.parent_id, kind, sp.name,
                                                     sp.start_ns, attributes, postgres=is_postgres(self.conn))

    def _move_session(self, wanted: str, now: float) -> None:
        """The run moves to the session its conversation names (created if new), with its approvals; its agents
        are derived anew in that session (`_retype` moves the calls and their context), and the old session's
        agents, and the session itself once empty, go at `finish` (`_drop_old_session`)."""
        old, S = self.session_id, sc.SessionRow
        if self.conn.execute(select(S.id).where(S.id == wanted)).first() is None:
            self.uow.session.add(S(id=wanted, project_id=self.project_id, task_id=self.task_id,
                                   title=self.index.conversation or f"trace {self.index.trace_id[:8]}",
                                   status="running", created_at=now, revision=1))
            self.uow.session.flush()
            self._filed(wanted)
            self._stage("session", [wanted])
            self._record("session", "insert", wanted, {"project": self.project_id, "task": self.task_id})
        self.conn.execute(update(sc.RunRow).where(sc.RunRow.id == self.run_id, sc.RunRow.session_id == old)
                          .values(session_id=wanted))
        self.conn.execute(update(sc.ApprovalRow).where(sc.ApprovalRow.run_id == self.run_id,
                                                       sc.ApprovalRow.session_id == old).values(session_id=wanted))
        self.session_id, self._session_agents, self._old_session = wanted, None, old

    def _drop_old_session(self) -> None:
        """The session the run left: its agents nothing derives any more, then the session itself when no run
        or agent is left in it (on PostgreSQL below the owner the empty session stays: no delete function)."""
        old = self._old_session
        if old is None:
            return
        current, self.session_id, self._shared = self.session_id, old, None
        try:
            self._drop_stale_agents()
        finally:
            self.session_id, self._shared = current, None
        S, R, A = sc.SessionRow, sc.RunRow, sc.AgentRow
        if self.conn.execute(select(R.id).where(R.session_id == old).limit(1)).first() is None and \
                self.conn.execute(select(A.id).where(A.session_id == old).limit(1)).first() is None and \
                self.may_rebuild():
            self.conn.execute(delete(sc.ImportStagingRow).where(sc.ImportStagingRow.entity_id == old))
            self.conn.execute(delete(S).where(S.id == old))
            self._filed(old, exists=False)
            self._record("session", "delete", old, {"project": self.project_id, "task": self.task_id})

    def _retype(self, stored_agent: str) -> None:
        """Correct, in this transaction, what stored spans were given before the spans now here arrived.

        Live traces arrive children first: a nested agent span written before its enclosing agent span was a
        top-level `agent` with an agent row of its own, a model call was filed under the agent known then (or
        under a stand-in named after the service), the run under the outermost agent of the first request.
        Decided again over the whole trace, each stored span gets what `import` would give it: its kind
        (`agent` / `sub_agent`), the agent recorded on a model call; the run moves to the trace's outermost
        agent, restored approvals to their span's agent. Agents whose calls changed have their context written
        again (`finish`), and agents nothing derives any more are deleted (`_drop_stale_agents`).
        Every update is conditional on the value read (`WHERE kind = :was`), in the writer's transaction."""
        assert self._skeleton is not None
        S, trace = sc.SpanRow, self.index.trace_id
        if self.run_agent != stored_agent:
            self.conn.execute(update(sc.RunRow).where(sc.RunRow.id == self.run_id, sc.RunRow.agent_id == stored_agent)
                              .values(agent_id=self.run_agent))
        kinds: list[dict[str, Any]] = []
        keyed: dict[str, str] = {}
        losing: dict[str, list[str]] = {}
        """Agent -> its calls that move to another agent."""
        for st in self._skeleton:
            if st.kind in ("agent", "sub_agent"):
                nested = st.parent_id is not None and self._enclosing_agent(st.parent_id) is not None
                wanted = "sub_agent" if nested else "agent"
                if wanted != st.kind:
                    kinds.append({"sid": span_row_id(trace, st.span_id), "was": st.kind, "now": wanted})
            elif not st.model and st.kind != "model":
                # nothing below depends on its agent (a tool span, say: most of a trace). Skipping the walk
                # changes nothing else: `prepare` derived every agent span's agent, in start order, before this
                continue
            agent = self._enclosing_agent(st.span_id) or self.run_agent
            if st.model:
                self._note_model(agent, st.start_ns, st.model)
            if st.kind == "model" and agent != st.agent:
                row_id = span_row_id(trace, st.span_id)
                keyed[row_id] = agent
                self._rebuild.add(agent)
                if st.agent:
                    losing.setdefault(st.agent, []).append(row_id)
        self._rebuild.update(self._brought_items({old: calls for old, calls in losing.items()
                                                  if old not in self._rebuild}))
        if kinds:
            done = self.conn.execute(update(S).where(S.id == bindparam("sid"), S.kind == bindparam("was"))
                                     .values(kind=bindparam("now")), kinds)
            self._retyped({k["sid"]: k["now"] for k in kinds}, "kind", done.rowcount)
        ids = list(keyed)
        # Compared as text: on SQLite a stored value's deflated bytes depend on where it was deflated (the
        # import's and the receiver's helpers deflate ahead: two streams), so packing the text read back again
        # would not give the stored bytes, and the compare-and-set would miss every such row.
        stored = func.agentdesk_text(S.attributes) if self.conn.dialect.name == "sqlite" else S.attributes
        for n in range(0, len(ids), IN_CHUNK):
            rows = self.conn.execute(select(S.id, S.attributes).where(S.id.in_(ids[n:n + IN_CHUNK]))).all()
            moves = []
            for row_id, text in rows:
                attrs = json.loads(text or "{}")
                attrs[AGENT_KEY] = keyed[row_id]
                moves.append({"sid": row_id, "was": text, "attrs": PLAIN.encode(attrs)})
            done = self.conn.execute(update(S).where(S.id == bindparam("sid"), stored == bindparam("was"))
                                     .values(attributes=bindparam("attrs")), moves)
            self._retyped({m["sid"]: keyed[m["sid"]] for m in moves}, "agent", done.rowcount)
        self.report.retyped += len(set(ids) | {k["sid"] for k in kinds})
        self._retype_approvals(stored_agent)

    def calls_of(self, agents: set[str]) -> dict[str, list[str]] | None:
        """Each of `agents`' calls (span row ids), from the kept skeleton as this write leaves it, when they are
        all there: the trace is alone in its session (no other trace's calls can be theirs). Else None."""
        if self._kept is None or self._session_shared():
            return None
        out: dict[str, list[str]] = {a: [] for a in agents}
        trace = self.index.trace_id
        for st in self._kept.values():
            if st.kind == "model" and st.agent in out:
                out[st.agent].append(span_row_id(trace, st.span_id))
        return out

    def _brought_items(self, leaving: dict[str, list[str]]) -> set[str]:
        """The agents of `leaving` (agent -> its calls that move away) one of whose leaving calls was the first of
        its calls to carry a message: only their context changes when the calls leave. An agent's context is its
        calls' messages numbered in call order, one turn (`otg_` + the call) per call that brought new items
        (`agent_context`); a call that brought none leaves every item's first call, position and turn as they
        were. So the agent that held a trace's orphaned calls (the run's, until their agent span arrives) is not
        rebuilt each time some move away. One statement for all of them (one an agent was ~30 a write)."""
        G = sc.ContextGroupRow
        owner = {"otg_" + digest(row_id): agent for agent, calls in leaving.items() for row_id in calls}
        groups = list(owner)
        brought: set[str] = set()
        for n in range(0, len(groups), IN_CHUNK):
            brought.update(agent for group, agent in self.conn.execute(
                select(G.id, G.agent_id).where(G.id.in_(groups[n:n + IN_CHUNK]))) if owner[group] == agent)
        return brought

    def _retyped(self, values: dict[str, str], field: str, rowcount: int) -> None:
        """What `_retype` changed, in the kept skeleton; a compare-and-set that missed (the stored rows were not
        what the skeleton said) leaves nothing to keep: the next write reads the stored skeleton again."""
        if self._kept is None:
            return
        if 0 <= rowcount < len(values):
            self._kept = None
            return
        for row_id, value in values.items():
            ids = split_span_row_id(row_id)
            if ids is not None and ids[1] in self._kept:
                had = self._kept[ids[1]]
                self._kept[ids[1]] = replace(had, kind=value) if field == "kind" else replace(had, agent=value)

    def _retype_approvals(self, stored_agent: str) -> None:
        """An approval belongs to its gate span's agent (restored from an export), or, asked for through the
        client's `join_trace` before any agent span arrived, to the run's agent: it moves with them, in this
        transaction, and the change log says so, so the queue and the tree show it under the right agent."""
        Ap = sc.ApprovalRow
        rows = self.conn.execute(select(Ap.id, Ap.span_id, Ap.agent_id, Ap.revision)
                                 .where(Ap.run_id == self.run_id)).all()
        for approval_id, span_row, agent, revision in rows:
            ids = split_span_row_id(span_row) if span_row else None
            if ids is not None and ids[1] in self.index.spans:
                wanted = self._enclosing_agent(ids[1]) or self.run_agent
            elif agent == stored_agent:
                wanted = self.run_agent
            else:
                continue
            if wanted == agent:
                continue
            self.conn.execute(update(Ap).where(Ap.id == approval_id, Ap.revision == revision)
                              .values(agent_id=wanted, revision=revision + 1))
            self._record("approval", "update", approval_id, {"project": self.project_id, "task": self.task_id,
                                                             "session": self.session_id, "agent": wanted,
                                                             "run": self.run_id}, revision + 1)

    def _session_shared(self) -> bool:
        """Whether other traces share this trace's session (a conversation): their agents may be this trace's."""
        if self._shared is None:
            R = sc.RunRow
            self._shared = self.conn.execute(select(R.id).where(R.session_id == self.session_id, R.id != self.run_id)
                                             .limit(1)).first() is not None
        return self._shared

    def _drop_stale_agents(self) -> None:
        """Agents a stored trace derived before it was whole (a sub-agent taken for a top-level one, the stand-in
        named after the service) and nothing derives now: deleted, children first, when nothing uses them (no
        run, approval, context or sub-agent; the same test as the server's `agentdesk_runtime_delete`). In a
        session other traces share (a conversation), an agent whose name an agent span of another trace bears
        is kept: it may be that trace's."""
        A, R = sc.AgentRow, sc.RunRow
        stale = {i: name for i, name in self.conn.execute(
            select(A.id, A.name).where(A.session_id == self.session_id)).all()
            if i not in self._agents and i.startswith(IMPORTED_AGENT_PREFIX)}
        if not stale:
            return
        if self._session_shared():
            others = select(R.id).where(R.session_id == self.session_id, R.id != self.run_id)
            names = skeleton.agent_names(self.conn, others)
            stale = {i: name for i, name in stale.items() if name not in names}
        while stale:
            ids = list(stale)
            used: set[str] = set()
            for column in (R.agent_id, sc.ApprovalRow.agent_id, sc.ContextItemRow.agent_id,
                           sc.ContextGroupRow.agent_id, A.parent_agent_id):
                used.update(str(u) for u in self.conn.execute(select(column).where(column.in_(ids))).scalars())
            gone = [i for i in ids if i not in used]
            if not gone:
                return
            if not self._server_delete("placeholder agent", gone):
                self.conn.execute(delete(A).where(A.id.in_(gone)))
            for agent_id in gone:
                self._record("agent", "delete", agent_id, {"project": self.project_id, "task": self.task_id,
                                                           "session": self.session_id})
                del stale[agent_id]
