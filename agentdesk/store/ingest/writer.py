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

The writer's other jobs are modules of their own: which agent a span belongs to
(`placement`), what a late parent corrects in the spans stored before it
(`correction`), what the model saw (`call_context`); `trace_write` is what they share.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, select, update

from agentdesk.store.errors import InvalidInput
from agentdesk.store.ingest import agent_context
from agentdesk.store.ingest.call_context import CallContext, ContextBatch
from agentdesk.store.ingest.correction import LateParentCorrection
from agentdesk.store.ingest.events import adopt_pending
from agentdesk.store.ingest.messages import PLAIN
from agentdesk.store.ingest.outbox import ask, is_postgres, post, run
from agentdesk.store.ingest.prepare import (  # item_id: readback and events import it from here too
    AGENT_KEY,
    EXTRA_KEYS,
    ORPHAN_KEY,
    Prepared,
    add_keys,
    digest,
    item_id,
)
from agentdesk.store.ingest.probe import Ahead, probe
from agentdesk.store.ingest.report import IngestReport
from agentdesk.store.ingest.rollup import ROLL_UP_ROOT_SQL, ROLL_UP_SQL, Root, Totals, store_roll_up
from agentdesk.store.ingest.rows import IN_CHUNK, SPAN_COLUMNS, bulk_insert, insert_tuples
from agentdesk.store.ingest.spans import span_row_id
from agentdesk.store.ingest.trace_index import TraceIndex
from agentdesk.store.ingest.trace_write import DEFAULT_PROJECT, IMPORTED_AGENT_PREFIX, filing, session_row_id
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.deflate import prepacked
from agentdesk.store.persistence.payloads import unpack
from agentdesk.store.text.times import NS_PER_S
from agentdesk.store.uow import UnitOfWork
from agentdesk.store.validation import payload_hash

TASK_TITLE = "Imported OpenTelemetry traces"
APPROVAL_ID_KEY = "agentdesk.approval.id"
RUN_TITLE_KEY = "agentdesk.run.title"
ORPHAN_PREFIX = "(orphan) "
"""Put before an orphan's name while it waits, so the timeline shows it as orphaned; removed when placed."""
__all__ = ["AGENT_KEY", "DEFAULT_PROJECT", "EXTRA_KEYS", "IMPORTED_AGENT_PREFIX", "ORPHAN_KEY", "TraceWriter",
           "item_id", "write_trace"]
_h = digest


class TraceWriter(LateParentCorrection, CallContext):
    """Writes one trace inside a unit of work: `prepare`, then `write` chunks, then `finish`."""

    def __init__(self, uow: UnitOfWork, index: TraceIndex, default_project: str | None, *,
                 staged: bool = False, resources: set[str] | None = None) -> None:
        super().__init__(uow, index, default_project, staged=staged, resources=resources)
        self._placed_upto = 0
        self._facts: tuple[Any, ...] | None = None
        self._written: list[str] = []
        self._resources: set[str] = resources if resources is not None else set()
        """Resource keys known stored: shared by the writers of one import (rows never deleted), so each
        key is looked up once per import, not once per trace."""
        self._orphans = 0
        """Orphan rows this writer inserted: a new run with none has nothing waiting to be placed."""
        self._seen: dict[str, int | None] = {}
        """Spans this writer wrote (row id -> end time, ns): a later chunk may repeat them."""
        self._new_run = False
        self._totals: Totals | None = None
        """A new run's roll-up facts, gathered from the rows this writer inserts (they are all of its spans):
        the roll-up then reads nothing, and the trace's inserts wait in the `outbox` for the next trace's probe.
        None when the stored rows must be read (a run stored before, a span completed, events applied)."""

    # -- placing the trace in the hierarchy ------------------------------------------------
    def prepare(self) -> None:
        looped = self.index.cycle()
        if looped is not None:
            raise InvalidInput(f"Trace {self.index.trace_id}: span {looped} is its own ancestor "
                               "(its parent chain loops back to it).")
        # Rows are dated by the trace, not by the import: re-importing elsewhere gives equal rows.
        now = self._first = (min((e.start_ns for e in self.index.spans.values()), default=0) / 1e9
                             or self.uow.now)
        name, where = filing(self.index, self.default_project)
        project_id, task_id, session_id = where.project_id, where.task_id, where.session_id
        conv = self.index.conversation
        taken = self.ahead.take(where) if self.ahead is not None else None
        found = self._probe = taken or probe(self.conn, where)
        if found.run is not None:
            self.project_id, self.task_id, self.session_id, stored_agent = found.run
            self._load_skeleton()
            wanted = session_row_id(self.project_id, self.index.conversation, self.index.trace_id)
            # its conversation id came only now (on the root span, say); a PostgreSQL login below the owner may
            # not move approvals between sessions (migration 0012 grants it agent_id, revision, span_id): stays
            if wanted != self.session_id and self.may_rebuild():
                self._move_session(wanted, now)
            if self.session_id == session_row_id(self.project_id, None, self.index.trace_id):
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
            self.forget_kept()
            self._totals = None if self.staged or found.events_waiting else Totals()
            self.project_id = project_id
            if not found.project:
                self._add(sc.ProjectRow, id=self.project_id, name=name, created_at=now, revision=1)
                self._filed(self.project_id)
                self._stage("project", [self.project_id])
                self._record("project", "insert", self.project_id)
            self.task_id = task_id
            if not found.task:
                self._add(sc.TaskRow, id=self.task_id, project_id=self.project_id, title=TASK_TITLE, created_at=now,
                          revision=1)
                self._filed(self.task_id)
                self._stage("task", [self.task_id])
                self._record("task", "insert", self.task_id, {"project": self.project_id})
            self.session_id = session_id
            if not found.session:
                self._session_agents = set()  # a session made now has no agents yet (agents.session_id is a key)
                title = conv or f"trace {self.index.root_name or self.index.trace_id[:8]}"
                self._add(sc.SessionRow, id=self.session_id, project_id=self.project_id, task_id=self.task_id,
                          title=title, status="running", created_at=now, revision=1)
                self._filed(self.session_id)
                self._stage("session", [self.session_id])
                self._record("session", "insert", self.session_id,
                                {"project": self.project_id, "task": self.task_id})
            self.run_agent = self._top_agent()
            self.root_row = self.index.root_span and span_row_id(self.index.trace_id, self.index.root_span)
        self._agents.setdefault(self.run_agent, {"parent": None})
        for span_id, _entry in self.agent_spans_by_start():
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
        context = ContextBatch()
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
        stored = attributes if sp.packed is None else prepacked(attributes, sp.packed, len(sp.attributes) - 1)
        return ((row_id, self.run_id, parent_row, self._kind(sp),
                 sp.name if orphan_of is None else ORPHAN_PREFIX + sp.name, sp.status, sp.start_ns,
                 sp.end_ns or None, sp.input_tokens, sp.output_tokens, sp.cost_usd,
                 stored, sp.input_text, sp.output_text,
                 sp.error, 1 if sp.kind == "model" and sp.inputs else None), orphan_of)

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
            agent_context.rebuild(self.conn, self.session_id, self._rebuild, self.calls_of(self._rebuild))
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


def original_name(name: str) -> str:
    return name[len(ORPHAN_PREFIX):] if name.startswith(ORPHAN_PREFIX) else name


def write_trace(uow: UnitOfWork, index: TraceIndex, chunks: Iterable[Sequence[Prepared]],
                default_project: str | None, resources: set[str] | None = None,
                ahead: Ahead | None = None) -> IngestReport:
    """Write one trace (its spans in any number of chunks) inside `uow`; `resources`: the resource keys
    known stored, shared by the traces of one import (`TraceWriter._resources`); `ahead`: the transaction's
    probes asked together (PostgreSQL), when the trace's writes go out at once (`outbox.post`): the
    next trace will not wait for them."""
    writer = TraceWriter(uow, index, default_project, resources=resources)
    writer.ahead = ahead
    writer.prepare()
    for chunk in chunks:
        writer.write(chunk)
    report = writer.finish()
    if ahead is not None:
        post(writer.conn)
    return report
