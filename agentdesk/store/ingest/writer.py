"""The bulk write path: decoded OTel spans into agentdesk's tables, one trace at a time.

Why it exists: the runtime API writes one transaction per span (with audit and
change log), about 9 minutes for 100,000 spans. Here a trace is written with
executemany inserts inside the caller's unit of work, the change log gets one
`span_batch` row per trace (the timeline reloads once per batch), and the caller
audits the whole write as one operation.

Identity is derived, never random: span row id = "o" + trace id + span id, run
id = "otr_" + trace id, and project/task/session/agent/context-item ids are
hashes of what identifies them. So writing the same data twice finds the rows
already there (duplicates are skipped; an open span that arrives again ended is
completed), and a span can name its parent before the parent exists. A span
whose parent is absent is an *orphan*: it is shown under its trace's root (or at
the top when the root is absent too), remembered in `otel_orphans`, and moved
under its parent in the write where the parent arrives.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import Connection, bindparam, delete, event, func, insert, select, update
from sqlalchemy import text as sql_text

from agentdesk.store.errors import InvalidInput
from agentdesk.store.ingest import agent_context, skeleton
from agentdesk.store.ingest.events import adopt_pending
from agentdesk.store.ingest.messages import PLAIN
from agentdesk.store.ingest.outbox import ask, is_postgres, run
from agentdesk.store.ingest.prepare import (  # item_id: readback and events import it from here too
    AGENT_KEY,
    EXTRA_KEYS,
    ORPHAN_KEY,
    Prepared,
    add_keys,
    digest,
    item_id,
)
from agentdesk.store.ingest.probe import Probe, probe
from agentdesk.store.ingest.report import IngestReport
from agentdesk.store.ingest.rollup import ROLL_UP_ROOT_SQL, ROLL_UP_SQL, Root, Totals, store_roll_up
from agentdesk.store.ingest.rows import IN_CHUNK, SPAN_COLUMNS, bulk_insert, insert_tuples
from agentdesk.store.ingest.skeleton_cache import Skeleton, cache_of
from agentdesk.store.ingest.spans import run_row_id, span_row_id, split_span_row_id
from agentdesk.store.ingest.trace_index import TraceIndex
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.payloads import unpack
from agentdesk.store.text.times import NS_PER_S
from agentdesk.store.uow import UnitOfWork
from agentdesk.store.validation import estimate_tokens, payload_hash

DEFAULT_PROJECT = "OpenTelemetry"
IMPORTED_AGENT_PREFIX = "ota_"
"""Agents made from OTel spans: their context is what the model was sent, so views show it read-only."""
TASK_TITLE = "Imported OpenTelemetry traces"
APPROVAL_ID_KEY = "agentdesk.approval.id"
RUN_TITLE_KEY = "agentdesk.run.title"
ORPHAN_PREFIX = "(orphan) "
"""Put before an orphan's name while it waits, so the timeline shows it as orphaned; removed when placed."""
__all__ = ["AGENT_KEY", "EXTRA_KEYS", "ORPHAN_KEY", "TraceWriter", "write_trace"]
_h = digest


class TraceWriter:
    """Writes one trace inside a unit of work: `prepare`, then `write` chunks, then `finish`."""

    def __init__(self, uow: UnitOfWork, index: TraceIndex, default_project: str | None, *,
                 staged: bool = False, resources: set[str] | None = None) -> None:
        self.rebind(uow)
        self.staged = staged
        """Written over many transactions (`store.otel.staging`): what it creates is named in
        `import_staging` (hidden from readers) and its change-log rows wait for `flip`."""
        self._deferred: list[tuple[str, str, str, dict[str, str] | None, int | None]] = []
        self._placed_upto = 0
        self._facts: tuple[Any, ...] | None = None
        self.index = index
        self.default_project = default_project
        self.run_id = run_row_id(index.trace_id)
        self.report = IngestReport(traces=1, run_ids=[self.run_id])
        self._agent_of: dict[str, str | None] = {}
        """OTel span id -> agentdesk agent id of its nearest agent span (None: the run's agent)."""
        self._agents: dict[str, dict[str, Any]] = {}
        self._new_agents: list[str] = []
        self._created: set[str] = set()
        self._pending_agents: list[dict[str, Any]] = []
        self._session_agents: set[str] | None = None
        self._positions: dict[str, int] = {}
        self._ordinals: dict[str, int] = {}
        self._item_ids: dict[tuple[str, str, str, int], str] = {}
        """(agent, role, content, repeat) -> item id, for the items already queued in this write."""
        self._context_touched: set[str] = set()
        self._written: list[str] = []
        self._resources: set[str] = resources if resources is not None else set()
        """Resource keys known stored: shared by the writers of one import (rows never deleted), so each
        key is looked up once per import, not once per trace."""
        self._orphans = 0
        """Orphan rows this writer inserted: a new run with none has nothing waiting to be placed."""
        self._stored_agents: dict[str, str | None] = {}
        """Stored span row id -> the agent of its nearest agent span (many children share a parent)."""
        self._seen: dict[str, int | None] = {}
        """Spans this writer wrote (row id -> end time, ns): a later chunk may repeat them."""
        self._new_run = False
        self._totals: Totals | None = None
        """A new run's roll-up facts, gathered from the rows this writer inserts (they are all of its spans):
        the roll-up then reads nothing, and the trace's inserts wait in the `outbox` for the next trace's probe.
        None when the stored rows must be read (a run stored before, a span completed, events applied)."""
        self._first = uow.now
        self._skeleton: list[skeleton.StoredSpan] | None = None
        """A stored trace's spans (`skeleton.load`), read into `index`: placing decides over the whole trace."""
        self._kept: Skeleton | None = None
        """The stored skeleton as this write leaves it, kept for the trace's next write after the commit
        (`skeleton_cache`); None when there is nothing to keep (a new run, a staged write)."""
        self._rebuild: set[str] = set()
        """Agents whose context is written again from their calls at `finish` (`agent_context.rebuild`)."""
        self._model_at: dict[str, int] = {}
        """Agent -> start of the span its model was taken from: the earliest span naming a model wins."""
        self._latest_turn: dict[str, float | None] = {}
        self._shared: bool | None = None
        self._old_session: str | None = None
        """The session a stored run left for the one its conversation names (`_move_session`)."""
        """Agent -> start of its latest stored turn: a call not after it cannot simply be appended."""

    def rebind(self, uow: UnitOfWork) -> None:
        """Continue in another unit of work (a staged trace takes one per slice)."""
        self.uow = uow
        self.conn: Connection = uow.session.connection()
        self._probe: Probe | None = None
        """`prepare`'s answers, good for this transaction only."""
        self._approval_spans: list[tuple[str, Prepared]] = []
        self._bumped = False
        if self.conn.dialect.name == "sqlite":  # random-id B-tree inserts thrash the default 2 MB page cache
            self.conn.exec_driver_sql("PRAGMA cache_size=-131072")

    def _record(self, entity: str, op: str, entity_id: str, parents: dict[str, str] | None = None,
                revision: int | None = None) -> None:
        """A change-log row now, or (staged) at the flip: no watcher hears of a trace before it is whole."""
        if self.staged:
            self._deferred.append((entity, op, entity_id, parents, revision))
        else:
            self.uow.record(entity, op, entity_id, parents, revision)

    def _stage(self, kind: str, ids: Iterable[str]) -> None:
        """Name rows this staged write created: hidden until the flip (same transaction as their insert)."""
        if not self.staged:
            return
        rows = [{"entity_id": i, "kind": kind, "run_id": self.run_id, "heartbeat_at": self.uow.now} for i in ids]
        if rows:
            self.conn.execute(insert(sc.ImportStagingRow), rows)

    # -- placing the trace in the hierarchy ------------------------------------------------
    def prepare(self) -> None:
        looped = self.index.cycle()
        if looped is not None:
            raise InvalidInput(f"Trace {self.index.trace_id}: span {looped} is its own ancestor "
                               "(its parent chain loops back to it).")
        # Rows are dated by the trace, not by the import: re-importing elsewhere gives equal rows.
        now = self._first = (min((e.start_ns for e in self.index.spans.values()), default=0) / 1e9
                             or self.uow.now)
        name = self.index.project or self.default_project or DEFAULT_PROJECT
        project_id = "otp_" + _h(name)
        task_id = "ott_" + _h(project_id)
        conv = self.index.conversation
        session_id = "ots_" + _h(project_id, conv or "trace:" + self.index.trace_id)
        found = self._probe = probe(self.conn, self.run_id, project_id, task_id, session_id, self.index.trace_id)
        if found.run is not None:
            self.project_id, self.task_id, self.session_id, stored_agent = found.run
            self._load_skeleton()
            wanted = "ots_" + _h(self.project_id, self.index.conversation or "trace:" + self.index.trace_id)
            # its conversation id came only now (on the root span, say); a PostgreSQL login below the owner may
            # not move approvals between sessions (migration 0012 grants it agent_id, revision, span_id): stays
            if wanted != self.session_id and self.may_rebuild():
                self._move_session(wanted, now)
            if self.session_id == "ots_" + _h(self.project_id, "trace:" + self.index.trace_id):
                # a session of its own, titled after its root span, which may have come only now
                title = f"trace {self.index.root_name or self.index.trace_id[:8]}"
                self.conn.execute(update(sc.SessionRow).where(sc.SessionRow.id == self.session_id,
                                                              sc.SessionRow.title != title).values(title=title))
            self.run_agent = self._top_agent()
            self.root_row = self.index.root_span and span_row_id(self.index.trace_id, self.index.root_span)
            if self.root_row is None:
                self.root_row = self._stored_root()
        else:
            self._new_run = True
            self._totals = None if self.staged or found.events_waiting else Totals()
            self.project_id = project_id
            if not found.project:
                self._add(sc.ProjectRow, id=self.project_id, name=name, created_at=now, revision=1)
                self._stage("project", [self.project_id])
                self._record("project", "insert", self.project_id)
            self.task_id = task_id
            if not found.task:
                self._add(sc.TaskRow, id=self.task_id, project_id=self.project_id, title=TASK_TITLE, created_at=now,
                          revision=1)
                self._stage("task", [self.task_id])
                self._record("task", "insert", self.task_id, {"project": self.project_id})
            self.session_id = session_id
            if not found.session:
                self._session_agents = set()  # a session made now has no agents yet (agents.session_id is a key)
                title = conv or f"trace {self.index.root_name or self.index.trace_id[:8]}"
                self._add(sc.SessionRow, id=self.session_id, project_id=self.project_id, task_id=self.task_id,
                          title=title, status="running", created_at=now, revision=1)
                self._stage("session", [self.session_id])
                self._record("session", "insert", self.session_id,
                                {"project": self.project_id, "task": self.task_id})
            self.run_agent = self._top_agent()
            self.root_row = self.index.root_span and span_row_id(self.index.trace_id, self.index.root_span)
        self._agents.setdefault(self.run_agent, {"parent": None})
        for span_id, entry in self.index.by_start():
            if entry.agent_key is not None:
                self._enclosing_agent(span_id)
        self._flush_agents()
        if found.run is not None:
            self._retype(stored_agent)
        self._claim_shared()
        if self._new_run:
            self._add(sc.RunRow, id=self.run_id, project_id=self.project_id, task_id=self.task_id,
                      session_id=self.session_id, agent_id=self.run_agent,
                      title=self.index.root_name or f"trace {self.index.trace_id[:8]}",
                      status="running", started_at=now, revision=1)
            self._stage("run", [self.run_id])

    def _add(self, table: type[sc.Base], **values: Any) -> None:
        """A container row, in the order they are keys of each other: queued on PostgreSQL (`outbox`: sent
        with the next read, in order), through the session elsewhere (flushed, so the next one finds it)."""
        if is_postgres(self.conn):
            bulk_insert(self.conn, table, [values])
            return
        self.uow.session.add(table(**values))
        self.uow.session.flush()

    def _claim_shared(self) -> None:
        """Containers this trace uses that an unfinished staged import created become visible now: they
        hold this trace too (which is whole when this transaction commits). Staged runs stay hidden."""
        if self._probe is not None and not self._probe.others_staged:
            return  # no other import has anything staged (asked in this transaction)
        St = sc.ImportStagingRow
        ids = [self.project_id, self.task_id, self.session_id, *self._agents]
        for n in range(0, len(ids), IN_CHUNK):
            if not self._server_delete("staging of others", ids[n:n + IN_CHUNK]):
                self.conn.execute(delete(St).where(St.entity_id.in_(ids[n:n + IN_CHUNK]), St.run_id != self.run_id,
                                                   St.kind != "run"))

    def _top_agent(self) -> str:
        """The run's agent: the trace's outermost agent span, else one named after the service."""
        for span_id, entry in self.index.by_start():
            if entry.agent_key is not None and self._enclosing_agent(entry.parent_id) is None:
                found = self._enclosing_agent(span_id)
                assert found is not None
                return found
        name = self.index.project or self.default_project or DEFAULT_PROJECT
        return self._ensure_agent("service:" + name, name, None)

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
        for st in self._skeleton:
            if st.span_id not in self.index.spans:
                self.index.note(st.span_id, st.parent_id, st.agent_key, st.agent_name, st.start_ns, None,
                                st.conversation, st.name)

    def _keep_skeleton(self, revision: int) -> Any:
        """After the commit only (a rolled-back write keeps nothing): the skeleton as stored at `revision`,
        the run's revision once this write's roll-up has bumped it."""
        store, run_id = self.uow.store, self.run_id

        def keep(_session: Any) -> None:
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
        for st in self._skeleton:
            row_id = span_row_id(trace, st.span_id)
            if st.kind in ("agent", "sub_agent"):
                nested = st.parent_id is not None and self._enclosing_agent(st.parent_id) is not None
                wanted = "sub_agent" if nested else "agent"
                if wanted != st.kind:
                    kinds.append({"sid": row_id, "was": st.kind, "now": wanted})
            agent = self._enclosing_agent(st.span_id) or self.run_agent
            if st.model:
                self._note_model(agent, st.start_ns, st.model)
            if st.kind == "model" and agent != st.agent:
                keyed[row_id] = agent
                self._rebuild.update(a for a in (agent, st.agent) if a)
        if kinds:
            done = self.conn.execute(update(S).where(S.id == bindparam("sid"), S.kind == bindparam("was"))
                                     .values(kind=bindparam("now")), kinds)
            self._retyped({k["sid"]: k["now"] for k in kinds}, "kind", done.rowcount)
        ids = list(keyed)
        for n in range(0, len(ids), IN_CHUNK):
            rows = self.conn.execute(select(S.id, S.attributes).where(S.id.in_(ids[n:n + IN_CHUNK]))).all()
            moves = []
            for row_id, text in rows:
                attrs = json.loads(text or "{}")
                attrs[AGENT_KEY] = keyed[row_id]
                moves.append({"sid": row_id, "was": text, "attrs": PLAIN.encode(attrs)})
            done = self.conn.execute(update(S).where(S.id == bindparam("sid"), S.attributes == bindparam("was"))
                                     .values(attributes=bindparam("attrs")), moves)
            self._retyped({m["sid"]: keyed[m["sid"]] for m in moves}, "agent", done.rowcount)
        self.report.retyped += len(set(ids) | {k["sid"] for k in kinds})
        self._retype_approvals(stored_agent)

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

    def _note_model(self, agent: str, start_ns: int, model: str) -> None:
        """An agent's model is the one its earliest span names (what `import`, in time order, sees first)."""
        facts = self._agents.setdefault(agent, {"parent": None})
        if not facts.get("model") or start_ns < self._model_at.get(agent, start_ns):
            facts["model"] = model
            self._model_at[agent] = start_ns

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

    def _enclosing_agent(self, span_id: str | None) -> str | None:
        """The agent of the nearest agent span at or above `span_id`.

        Iterative, resolved top-down, memoised: a trace can be 100,000 spans deep, and a
        hostile one can loop (the walk stops after as many steps as there are spans).
        """
        path: list[str] = []
        found: str | None = None
        current = span_id
        while current is not None:
            if current in self._agent_of:
                found = self._agent_of[current]
                break
            entry = self.index.spans.get(current)
            if entry is None:  # not here; stored, unless the stored spans are in the index already
                found = (None if self._skeleton is not None
                         else self._stored_agent_of(span_row_id(self.index.trace_id, current)))
                break
            path.append(current)
            current = entry.parent_id
            if len(path) > len(self.index.spans):
                break
        for sid in reversed(path):
            entry = self.index.spans[sid]
            if entry.agent_key is not None:
                found = self._ensure_agent(entry.agent_key, entry.agent_name or entry.agent_key, found)
            self._agent_of[sid] = found
        return found

    def _stored_agent_of(self, row_id: str) -> str | None:
        """For a parent written earlier: walk stored spans up to the nearest agent span (once per parent)."""
        if row_id not in self._stored_agents:
            self._stored_agents[row_id] = self._walk_stored(row_id)
        return self._stored_agents[row_id]

    def _walk_stored(self, row_id: str) -> str | None:
        seen = 0
        current: str | None = row_id
        while current is not None and seen < 100_000:
            row = self.conn.execute(select(sc.SpanRow.kind, sc.SpanRow.parent_span_id, sc.SpanRow.attributes,
                                           sc.SpanRow.name).where(sc.SpanRow.id == current)).first()
            if row is None:
                return None
            if row.kind in ("agent", "sub_agent"):
                attrs = json.loads(row.attributes or "{}")
                name = attrs.get("gen_ai.agent.name") or row.name
                key = str(attrs.get("gen_ai.agent.id") or name)
                hit = self.conn.execute(select(sc.AgentRow.id).where(
                    sc.AgentRow.session_id == self.session_id, sc.AgentRow.name == str(name))).scalar()
                return hit if hit else self._ensure_agent(key, str(name), None)
            current, seen = row.parent_span_id, seen + 1
        return None

    def _ensure_agent(self, key: str, name: str, parent: str | None) -> str:
        agent_id = IMPORTED_AGENT_PREFIX + _h(self.session_id, parent or "", key)
        if agent_id in self._agents:
            return agent_id
        if self._session_agents is None:  # one query for the session's agents, not one per agent
            self._session_agents = set(self.conn.execute(
                select(sc.AgentRow.id).where(sc.AgentRow.session_id == self.session_id)).scalars())
        if agent_id not in self._session_agents:
            self._session_agents.add(agent_id)
            self._pending_agents.append({
                "id": agent_id, "project_id": self.project_id, "task_id": self.task_id,
                "session_id": self.session_id, "parent_agent_id": parent, "name": name, "model": "",
                "status": "running", "context_revision": 0, "context_budget": 128_000,
                "created_at": self._first, "revision": 1})
            self._new_agents.append(agent_id)
            self._created.add(agent_id)
        self._agents[agent_id] = {"parent": parent}
        return agent_id

    def _flush_agents(self) -> None:
        """New agents in creation order (a parent is always created before its sub-agents)."""
        if self._pending_agents:
            bulk_insert(self.conn, sc.AgentRow, self._pending_agents)
            self._stage("agent", [a["id"] for a in self._pending_agents])
            self._pending_agents = []

    def _stored_root(self) -> str | None:
        S, Orph = sc.SpanRow, sc.OtelOrphanRow
        if self.conn.execute(select(Orph.span_id).join(S, S.id == Orph.span_id).where(
                Orph.run_id == self.run_id, S.parent_span_id.is_(None)).limit(1)).first() is not None:
            return None  # orphans still at the top: the root has not arrived (it would have taken them)
        return self.conn.execute(
            select(S.id).where(S.run_id == self.run_id, S.parent_span_id.is_(None),
                               S.id.not_in(select(Orph.span_id).where(Orph.run_id == self.run_id)))
            .order_by(S.started_at).limit(1)).scalar()

    # -- spans -----------------------------------------------------------------------------
    def write(self, spans: Sequence[Prepared]) -> None:
        """One chunk of this trace's spans (any order, duplicates allowed)."""
        if self.staged and not self._bumped:  # a slice adds spans before the roll-up: a kept skeleton is stale
            self._bumped = True
            self.conn.execute(update(sc.RunRow).where(sc.RunRow.id == self.run_id)
                              .values(revision=sc.RunRow.revision + 1))
        unique: dict[str, Prepared] = {}
        for span in spans:
            had = unique.get(span.span_id)
            if had is None or (span.end_ns and not had.end_ns):
                if had is not None:
                    self.report.duplicates += 1
                unique[span.span_id] = span
            else:
                self.report.duplicates += 1
        # In time order, so a call's messages take context positions after the earlier calls'.
        trace = self.index.trace_id
        ids = {span_row_id(trace, sp.span_id): sp
               for sp in sorted(unique.values(), key=lambda sp: (sp.start_ns, sp.span_id))}
        seen = self._seen
        # A new run has no stored spans: only what this writer wrote can be there already.
        existing = {r: seen[r] for r in ids if r in seen} if self._new_run else self._existing(list(ids))
        parents_missing = {span_row_id(trace, sp.parent_id) for sp in unique.values()
                           if sp.parent_id is not None and sp.parent_id not in self.index.spans}
        stored_parents = (set(self._stored_ids(list(parents_missing))) if parents_missing and not self._new_run
                          else set())
        span_rows: list[tuple[Any, ...]] = []
        orphan_rows: list[dict[str, Any]] = []
        context = _ContextBatch()
        for row_id, sp in ids.items():
            if sp.resource_key is not None and sp.resource_key not in self._resources:
                self._resource(sp.resource_key, sp.resource or "{}")
            if row_id in existing:
                if existing[row_id] is None and sp.end_ns:
                    self._complete(row_id, sp)
                else:
                    self.report.duplicates += 1
                continue
            row, orphan_of = self._span_row(row_id, sp, stored_parents)
            self._track(sp, row[3], row[11])
            if APPROVAL_ID_KEY in sp.attributes:  # a gate agentdesk exported: its approval comes back too
                self._approval_spans.append((row_id, sp))
            if sp.messages:
                self._context(row_id, sp, context)
            span_rows.append(row)
            if orphan_of is not None:
                orphan_rows.append({"span_id": row_id, "run_id": self.run_id, "parent_id": orphan_of})
        self._flush_agents()
        if span_rows:
            insert_tuples(self.conn, sc.SpanRow.__tablename__, SPAN_COLUMNS, sorted(span_rows))
            self._written.extend(r[0] for r in span_rows)
            if self._totals is not None:
                self._totals.add(span_rows, self.root_row)
            seen.update((r[0], r[7]) for r in span_rows)
            self.report.spans_written += len(span_rows)
        if orphan_rows:
            bulk_insert(self.conn, sc.OtelOrphanRow, orphan_rows)
            self._orphans += len(orphan_rows)
        self._flush_context(context)

    def _existing(self, row_ids: list[str]) -> dict[str, int | None]:
        S = sc.SpanRow
        out: dict[str, int | None] = {}
        for n in range(0, len(row_ids), IN_CHUNK):
            out.update((i, e) for i, e in self.conn.execute(
                select(S.id, S.ended_at).where(S.id.in_(row_ids[n:n + IN_CHUNK]))))
        return out

    def _stored_ids(self, row_ids: list[str]) -> list[str]:
        return list(self._existing(row_ids))

    def _resource(self, key: str, text: str) -> None:
        self._resources.add(key)
        if self.uow.session.get(sc.OtelResourceRow, key) is None:
            self.uow.session.add(sc.OtelResourceRow(key=key, attributes=text))
            self.uow.session.flush()

    def _kind(self, sp: Prepared) -> str:
        if sp.kind == "agent" and sp.parent_id is not None and self._enclosing_agent(sp.parent_id) is not None:
            return "sub_agent"
        return sp.kind

    def _span_row(self, row_id: str, sp: Prepared, stored_parents: set[str]) -> tuple[tuple[Any, ...], str | None]:
        """The span's row as a tuple in `SPAN_COLUMNS` order, and the parent it waits for (an orphan)."""
        own: dict[str, Any] = {}
        parent_row, orphan_of = None, None
        if sp.parent_id is not None:
            wanted = span_row_id(self.index.trace_id, sp.parent_id)
            if sp.parent_id in self.index.spans or wanted in stored_parents:
                parent_row = wanted
            else:
                orphan_of = wanted
                parent_row = self.root_row if self.root_row != row_id else None
                own[ORPHAN_KEY] = f"its parent span {sp.parent_id} has not arrived"
        if sp.kind == "model":  # every model call names its agent (`_retype` moves it; log events find it)
            own[AGENT_KEY] = self._agent_of_span(sp)
        if sp.model:  # an agent written by an earlier request gets its model too (it did only when whole)
            self._note_model(self._agent_of_span(sp), sp.start_ns, sp.model)
        attributes = add_keys(sp.attributes, own) if own else sp.attributes
        if sp.kind == "model" and sp.messages and (orphan_of is not None or self._skeleton is not None):
            # a trace arriving in pieces: its calls may change agent and be numbered again (as they are now,
            # and as they will be once placed under their parent)
            agent_context.remember(row_id, attributes, sp.messages)
            if orphan_of is not None:
                agent_context.remember(row_id, add_keys(sp.attributes, {AGENT_KEY: own[AGENT_KEY]}), sp.messages)
        return ((row_id, self.run_id, parent_row, self._kind(sp),
                 sp.name if orphan_of is None else ORPHAN_PREFIX + sp.name, sp.status, sp.start_ns,
                 sp.end_ns or None, sp.input_tokens, sp.output_tokens, sp.cost_usd,
                 attributes, sp.input_text, sp.output_text,
                 sp.error, 1 if sp.kind == "model" and sp.inputs else None), orphan_of)

    def _agent_of_span(self, sp: Prepared) -> str:
        return self._enclosing_agent(sp.span_id) or self.run_agent

    def _complete(self, row_id: str, sp: Prepared) -> None:
        waiting = self.conn.execute(select(sc.OtelOrphanRow.parent_id)
                                    .where(sc.OtelOrphanRow.span_id == row_id)).scalar()
        own: dict[str, Any] = {}
        if sp.kind == "model":
            own[AGENT_KEY] = self._agent_of_span(sp)
        if waiting is not None:
            own[ORPHAN_KEY] = f"its parent span {sp.parent_id} has not arrived"
        kind, attributes = self._kind(sp), add_keys(sp.attributes, own) if own else sp.attributes
        self.conn.execute(update(sc.SpanRow).where(sc.SpanRow.id == row_id).values(
            status=sp.status, ended_at=sp.end_ns, input_tokens=sp.input_tokens,
            output_tokens=sp.output_tokens, cost_usd=sp.cost_usd, output_text=sp.output_text,
            input_text=sp.input_text, error=sp.error, kind=kind,
            name=sp.name if waiting is None else ORPHAN_PREFIX + sp.name, attributes=attributes))
        self._track(sp, kind, attributes)
        self._written.append(row_id)
        self._seen[row_id] = sp.end_ns
        self._totals = None  # a row changed after it was counted: the roll-up reads the stored rows
        self.report.completed += 1

    # -- what the model saw ----------------------------------------------------------------
    def _context(self, row_id: str, sp: Prepared, batch: _ContextBatch) -> None:
        """Queue the call's messages as context items of its agent (deduplicated)."""
        if sp.kind != "model":
            return
        agent = self._agent_of_span(sp)
        at = sp.start_ns / 1e9
        if agent not in self._created and agent not in self._rebuild and self.may_rebuild():
            if agent not in self._latest_turn:
                self._latest_turn[agent] = agent_context.latest_turn(self.conn, agent)
            latest = self._latest_turn[agent]
            if latest is not None and at <= latest:
                self._rebuild.add(agent)  # an earlier call may take items a later one brought: numbered again
        repeats: dict[tuple[str, str], int] = {}
        known_ids = self._item_ids
        group = ""
        for role, content, kind in sp.messages:
            # The same message in the next call (a growing or sliding history) is the same item;
            # a message repeated within one call is a new one.
            k = repeats[(role, content)] = repeats.get((role, content), -1) + 1
            if (agent, role, content, k) in known_ids:  # most of a history was sent before
                continue
            item = known_ids[(agent, role, content, k)] = item_id(agent, role, content, k)
            group = group or "otg_" + _h(row_id)
            batch.candidates.append((item, agent, group, kind, role, content, at))

    def _start_numbering(self, agent: str) -> None:
        """Where an agent's items and turns continue from: 0 for an agent made in this write."""
        if agent in self._created:
            self._positions[agent] = self._ordinals[agent] = 0
            return
        self._positions[agent] = self.conn.execute(
            select(func.coalesce(func.max(sc.ContextItemRow.position), 0))
            .where(sc.ContextItemRow.agent_id == agent)).scalar_one()
        self._ordinals[agent] = self.conn.execute(
            select(func.coalesce(func.max(sc.ContextGroupRow.ordinal), 0))
            .where(sc.ContextGroupRow.agent_id == agent)).scalar_one()

    def _flush_context(self, batch: _ContextBatch) -> None:
        """New items get the next positions of their agent, in the order they were first seen."""
        ids = [c[0] for c in batch.candidates]
        stored: set[str] = set()
        for n in range(0, len(ids), IN_CHUNK):
            stored.update(self.conn.execute(select(sc.ContextItemRow.id)
                                            .where(sc.ContextItemRow.id.in_(ids[n:n + IN_CHUNK]))).scalars())
        groups: dict[str, dict[str, Any]] = {}
        for item, agent, group, kind, role, content, at in batch.candidates:
            if item in stored or agent in self._rebuild:  # those are numbered again at `finish`
                continue
            if agent not in self._positions:
                self._start_numbering(agent)
            self._positions[agent] += 1
            if group not in groups:
                self._ordinals[agent] += 1  # turns numbered 1, 2, 3... per agent
                groups[group] = {"id": group, "agent_id": agent, "ordinal": self._ordinals[agent],
                                 "kind": "turn", "revision": 1, "created_at": at}
            tokens = estimate_tokens(content)
            batch.items.append({"id": item, "agent_id": agent, "group_id": group,
                                "position": self._positions[agent], "kind": kind, "role": role,
                                "content": content, "visible": True, "locked": False, "revision": 1,
                                "token_estimate": tokens, "compaction_id": None, "summary_of": None,
                                "removed": False, "created_at": at})
            batch.revisions.append({"item_id": item, "revision": 1, "content": content, "token_estimate": tokens,
                                    "created_at": at})
            self._context_touched.add(agent)
        batch.groups.extend(groups.values())
        batch.flush(self.conn)

    # -- closing the trace -----------------------------------------------------------------
    def _restore_approvals(self) -> None:
        """Approvals exported on gate spans (`agentdesk.approval.*`) become approval rows again, decided as they
        were; one still pending when exported comes back expired (no agent is waiting for it here)."""
        for row_id, sp in self._approval_spans:
            a = json.loads(sp.attributes)
            original = str(a.get(APPROVAL_ID_KEY))
            approval_id = "ota_" + _h(self.run_id, original)
            if self.uow.session.get(sc.ApprovalRow, approval_id) is not None:
                continue
            tool = str(a.get("agentdesk.approval.tool") or a.get("gen_ai.tool.name") or sp.name)[:128]
            arguments = str(a.get("agentdesk.approval.arguments") or "{}")
            status = str(a.get("agentdesk.approval.status") or "expired")
            if status not in ("approved", "denied", "expired"):
                status = "expired"
            edited = a.get("agentdesk.approval.edited_arguments")
            at = sp.start_ns / 1e9
            row = sc.ApprovalRow(
                id=approval_id, tool_call_id=None, project_id=self.project_id, task_id=self.task_id,
                session_id=self.session_id, agent_id=self._agent_of_span(sp), run_id=self.run_id, span_id=row_id,
                tool_name=tool, arguments=arguments, payload_hash=payload_hash(tool, arguments), status=status,
                created_at=at, decided_at=(sp.end_ns / 1e9 if sp.end_ns else at),
                decided_by=a.get("agentdesk.approval.decided_by"), reason=a.get("agentdesk.approval.reason"),
                edited_arguments=str(edited) if edited else None,
                edited_hash=payload_hash(tool, str(edited)) if edited else None, revision=1)
            self.uow.session.add(row)
            self.uow.session.flush()
            self._record("approval", "insert", approval_id, {"project": row.project_id, "task": row.task_id,
                                                             "session": row.session_id, "agent": row.agent_id,
                                                             "run": row.run_id}, 1)
        self._approval_spans = []

    def finish(self) -> IngestReport:
        self._restore_approvals()
        # log records (GenAI events) that came before their spans
        if self._probe is None or self._probe.events_waiting:
            self.report.events_joined += adopt_pending(self.conn, self.index.trace_id, self._context_touched,
                                                       rebuild=self.may_rebuild())
        if self._rebuild and self.may_rebuild():
            agent_context.rebuild(self.conn, self.session_id, self._rebuild)
            self._context_touched |= self._rebuild
        if self._skeleton is not None:
            self._drop_stale_agents()
            self._drop_old_session()
        self._place_orphans()
        self._roll_up()
        parents = {"project": self.project_id, "task": self.task_id, "session": self.session_id,
                   "agent": self.run_agent, "run": self.run_id}
        for agent_id in self._new_agents:
            p = {"project": self.project_id, "task": self.task_id, "session": self.session_id}
            parent = self._agents[agent_id].get("parent")
            if parent:
                p["parent_agent"] = parent
            self._record("agent", "insert", agent_id, p)
        self._record("run", "insert" if self._new_run else "update", self.run_id,
                        {k: parents[k] for k in ("project", "task", "session", "agent")})
        if self._written or self.report.retyped:
            self._record("span_batch", "insert", self.run_id, parents)
        touched = sorted(self._context_touched)
        if touched:
            ids = "= ANY(:agents)" if is_postgres(self.conn) else "IN (SELECT value FROM json_each(:agents))"
            run(self.conn, f"UPDATE agents SET context_revision = context_revision + 1 WHERE id {ids}",
                {"agents": touched if is_postgres(self.conn) else json.dumps(touched)})
        for agent_id in touched:
            self._record("context", "update", agent_id, {"agent": agent_id, "session": self.session_id})
        if self._new_run:  # every orphan of a new run is one this writer inserted
            self.report.orphans_pending = self._orphans - self.report.placed
        else:
            self.report.orphans_pending = self.conn.execute(
                select(func.count()).select_from(sc.OtelOrphanRow)
                .where(sc.OtelOrphanRow.run_id == self.run_id)).scalar_one()
        return self.report

    def may_rebuild(self) -> bool:
        """Whether this login may delete and rewrite imported context (`agent_context`): not a PostgreSQL login
        below the owner (it holds no DELETE on context tables, migration 0012), which appends instead."""
        login = self.uow.store.login
        return self.conn.dialect.name != "postgresql" or login is None or login.owner

    def _server_delete(self, what: str, ids: list[str]) -> bool:
        """On PostgreSQL below the owner, the runtime's few deletes go through `agentdesk_runtime_delete`
        (migration 0012): an agent login holds no DELETE grant (one would let it LOCK any of these tables)."""
        login = self.uow.store.login
        if self.conn.dialect.name != "postgresql" or login is None or login.owner:
            return False
        self.conn.execute(sql_text("SELECT agentdesk_runtime_delete(:what, :run, CAST(:ids AS text[]))"),
                          {"what": what, "run": self.run_id, "ids": ids})
        return True

    def _place_orphans(self, roots: bool = True) -> None:
        """Orphans whose parent this write brought move under it; set-based, so a batch costs a few
        statements however many children were waiting (the receiver's batches are mostly children)."""
        Orph, S = sc.OtelOrphanRow, sc.SpanRow
        written = self._written[self._placed_upto:]
        self._placed_upto = len(self._written)
        if self._new_run and not self._orphans and self.root_row is not None:
            return  # a new run's orphans are all this writer's: none written, none waits, nothing to move
        for n in range(0, len(written), IN_CHUNK):
            rows = self.conn.execute(select(Orph.span_id, Orph.parent_id, S.attributes, S.name)
                                     .join(S, S.id == Orph.span_id)
                                     .where(Orph.parent_id.in_(written[n:n + IN_CHUNK]))).all()
            if not rows:
                continue
            moves = []
            for span_id, parent_id, text, name in rows:
                attrs = json.loads(text)
                attrs.pop(ORPHAN_KEY, None)
                moves.append({"sid": span_id, "parent": parent_id, "attrs": PLAIN.encode(attrs),
                              "plain_name": original_name(name)})
            self.conn.execute(update(S).where(S.id == bindparam("sid")).values(
                parent_span_id=bindparam("parent"), attributes=bindparam("attrs"), name=bindparam("plain_name")),
                moves)
            placed = [m["sid"] for m in moves]
            if not self._server_delete("orphans", placed):
                self.conn.execute(delete(Orph).where(Orph.span_id.in_(placed)))
            self.report.placed += len(moves)
        if not roots:
            return
        if self.root_row is None:
            self.root_row = self._stored_root()
        if self.root_row is not None:  # orphans written before their root: under the root now
            tops = list(self.conn.execute(select(Orph.span_id).join(S, S.id == Orph.span_id).where(
                Orph.run_id == self.run_id, S.parent_span_id.is_(None), S.id != self.root_row)).scalars())
            for n in range(0, len(tops), IN_CHUNK):
                self.conn.execute(update(S).where(S.id.in_(tops[n:n + IN_CHUNK])).values(parent_span_id=self.root_row))

    def roll_up_facts(self, conn: Connection, root: str | None = None) -> tuple[Any, ...]:
        """The run's totals over its spans; a staged write reads them outside the write lock (nobody
        else writes a staged run's spans), so the settling transaction only updates. With `root`, the
        root span's (id, status, name, error, attributes) follow, read in the same statement (a round
        trip fewer per trace on PostgreSQL, where the trace's queued inserts go with it: `outbox`)."""
        found = ask(conn, ROLL_UP_SQL if root is None else ROLL_UP_ROOT_SQL, {"run": self.run_id, "root": root})
        assert found is not None
        return found

    def _roll_up(self) -> None:
        given, self._facts = self._facts, None
        root: Root | None = None
        merged = False
        if given is None:
            given = (self._totals.facts() if self._totals is not None
                     else self.roll_up_facts(self.conn, self.root_row))
            if len(given) > 7:
                merged = True
                given, found = given[:7], given[7:]
                root = Root(*found[1:]) if found[0] is not None else None
        if not merged and self.root_row is not None:
            S = sc.SpanRow
            stored = self.conn.execute(select(S.status, S.name, S.error, S.attributes)
                                       .where(S.id == self.root_row)).first()
            root = Root(*stored) if stored is not None else None
        _total, open_, first_ns, last_ns, tin, tout, cost = given
        # The run and session keep float seconds (no OTLP time of their own); their spans' are nanoseconds
        first, last = (None if t is None else t / NS_PER_S for t in (first_ns, last_ns))
        status = "running" if open_ else ("failed" if root is not None and root.status == "error" else "done")
        title: str | None = None
        if root is not None:
            attributes = unpack(root.attributes) or ""  # the roll-up's own SQL reads the stored (maybe packed) value
            named = json.loads(attributes).get(RUN_TITLE_KEY) if RUN_TITLE_KEY in attributes else None
            title = named if isinstance(named, str) and named else root.name
        self._flush_agents()
        by_model: dict[str, list[str]] = {}
        for agent_id, facts in self._agents.items():
            if facts.get("model"):
                by_model.setdefault(str(facts["model"]), []).append(agent_id)
        whole = self._skeleton is not None
        unset = ([a for a, facts in self._agents.items() if not facts.get("model")]
                 if whole and not self._session_shared() else [])
        ended = None if open_ else last
        params = {"run": self.run_id, "status": status, "started_at": first, "ended_at": ended,
                  "input_tokens": int(tin), "output_tokens": int(tout), "cost_usd": float(cost),
                  "error": root.error if root is not None and status == "failed" else None, "title": title,
                  "agent_status": {"running": "running", "failed": "failed"}.get(status, "done"),
                  "session": self.session_id, "session_status": status}
        # a trace stored before is seen whole now: its agents' model is its earliest span's, and one whose
        # calls all moved away has none
        store_roll_up(self.conn, params, list(self._agents), by_model, whole=whole, unset=unset)
        self._record("session", "update", self.session_id, {"project": self.project_id, "task": self.task_id})


@dataclass
class _ContextBatch:
    groups: list[dict[str, Any]] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    revisions: list[dict[str, Any]] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    candidates: list[tuple[str, str, str, str, str, str, float]] = field(default_factory=list)
    """(item id, agent, group, item kind, role, content, at) of messages not yet known in this write."""

    def flush(self, conn: Connection) -> None:
        for table, rows in ((sc.ContextGroupRow, self.groups), (sc.ContextItemRow, self.items),
                            (sc.ContextItemRevisionRow, self.revisions), (sc.SpanContextRow, self.sent)):
            if rows:
                bulk_insert(conn, table, rows)


def original_name(name: str) -> str:
    return name[len(ORPHAN_PREFIX):] if name.startswith(ORPHAN_PREFIX) else name


def write_trace(uow: UnitOfWork, index: TraceIndex, chunks: Iterable[Sequence[Prepared]],
                default_project: str | None, resources: set[str] | None = None) -> IngestReport:
    """Write one trace (its spans in any number of chunks) inside `uow`; `resources`: the resource keys
    known stored, shared by the traces of one import (`TraceWriter._resources`)."""
    writer = TraceWriter(uow, index, default_project, resources=resources)
    writer.prepare()
    for chunk in chunks:
        writer.write(chunk)
    return writer.finish()
