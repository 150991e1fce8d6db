"""Read queries of agentdesk's own schema, returning read-model values.

Every method is one short read transaction. Counts and roll-ups are batched per
level (one GROUP BY for all rows of a level), never one query per row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from sqlalchemy import func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from agentdesk.store import readmodel as rm
from agentdesk.store.approvals.reads import read_approval
from agentdesk.store.control.state import RunControl, read_in, read_many
from agentdesk.store.errors import NotFound
from agentdesk.store.ingest import readback
from agentdesk.store.ingest.staging import visible
from agentdesk.store.persistence import convert
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.bus import EntityKind
from agentdesk.store.persistence.database import Store
from agentdesk.store.readmodel import Location, Page, SpanTable
from agentdesk.store.text.times import ns_column

ROLL_UP_ORDER = ("waiting", "running", "failed", "done", "cancelled", "idle", "pending")
"""A parent's status is its most urgent child's: an operator looks where agents wait first."""


def roll_up(statuses: Iterable[str]) -> str:
    present = set(statuses)
    for status in ROLL_UP_ORDER:
        if status in present:
            return status
    return "idle"


def pending_by(session: Session, column: InstrumentedAttribute[Any], ids: list[str]) -> dict[str, int]:
    """Whatever waits for a person under each id: pending approvals plus pending questions (`asks`, which carry
    the same hierarchy columns), so the tree's count says where someone is needed."""
    if not ids:
        return {}
    found: dict[str, int] = {}
    asked = getattr(sc.AskRow, column.key)
    for table, key in ((sc.ApprovalRow, column), (sc.AskRow, asked)):
        rows = session.execute(
            select(key, func.count()).where(table.status == "pending", key.in_(ids)).group_by(key)).all()
        for found_key, count in rows:
            found[found_key] = found.get(found_key, 0) + count
    return found


def statuses_by(session: Session, column: InstrumentedAttribute[Any], ids: list[str]) -> dict[str, str]:
    rows = session.execute(
        select(column, sc.AgentRow.status).where(column.in_(ids), visible(sc.AgentRow.id)).distinct()).all()
    grouped: dict[str, list[str]] = {}
    for key, status in rows:
        grouped.setdefault(key, []).append(status)
    return {key: roll_up(values) for key, values in grouped.items()}


def _staged(session: Session, entity_id: str) -> bool:
    """Whether an unfinished import still hides this row: asked for by id (a saved selection, a
    search result, `--select`), it is as absent as it is from the tree until the import's flip."""
    return session.get(sc.ImportStagingRow, entity_id) is not None


class NativeQueries:
    def __init__(self, store: Store) -> None:
        self.store = store

    def projects(self) -> list[rm.Project]:
        with self.store.reading() as s:
            rows = s.execute(select(sc.ProjectRow).where(visible(sc.ProjectRow.id))
                             .order_by(sc.ProjectRow.created_at)).scalars().all()
            ids = [r.id for r in rows]
            pending = pending_by(s, sc.ApprovalRow.project_id, ids)
            status = statuses_by(s, sc.AgentRow.project_id, ids)
            tasks: dict[str, int] = {key: n for key, n in s.execute(
                select(sc.TaskRow.project_id, func.count()).where(visible(sc.TaskRow.id))
                .group_by(sc.TaskRow.project_id))}
            return [convert.project(r, status.get(r.id, "idle"), pending.get(r.id, 0), tasks.get(r.id, 0))
                    for r in rows]

    def tasks(self, project_id: str) -> list[rm.Task]:
        with self.store.reading() as s:
            rows = s.execute(select(sc.TaskRow).where(sc.TaskRow.project_id == project_id, visible(sc.TaskRow.id))
                             .order_by(sc.TaskRow.created_at)).scalars().all()
            ids = [r.id for r in rows]
            pending = pending_by(s, sc.ApprovalRow.task_id, ids)
            status = statuses_by(s, sc.AgentRow.task_id, ids)
            return [convert.task(r, status.get(r.id, "idle"), pending.get(r.id, 0)) for r in rows]

    def sessions(self, task_id: str) -> list[rm.Session]:
        with self.store.reading() as s:
            rows = s.execute(select(sc.SessionRow).where(sc.SessionRow.task_id == task_id,
                                                         visible(sc.SessionRow.id))
                             .order_by(sc.SessionRow.created_at)).scalars().all()
            pending = pending_by(s, sc.ApprovalRow.session_id, [r.id for r in rows])
            return [convert.session(r, pending.get(r.id, 0)) for r in rows]

    def agents(self, session_id: str) -> list[rm.Agent]:
        """All agents of a session, parents before their sub-agents."""
        with self.store.reading() as s:
            rows = s.execute(select(sc.AgentRow).where(sc.AgentRow.session_id == session_id,
                                                       visible(sc.AgentRow.id))
                             .order_by(sc.AgentRow.created_at)).scalars().all()
            ids = [r.id for r in rows]
            pending = pending_by(s, sc.ApprovalRow.agent_id, ids)
            runs: dict[str, int] = {key: n for key, n in s.execute(
                select(sc.RunRow.agent_id, func.count()).where(sc.RunRow.agent_id.in_(ids), visible(sc.RunRow.id))
                .group_by(sc.RunRow.agent_id))}
            return [convert.agent(r, pending.get(r.id, 0), runs.get(r.id, 0)) for r in rows]

    def runs(self, agent_id: str, offset: int = 0, limit: int = 200) -> Page[rm.Run]:
        """Newest first: the run an operator wants is almost always the latest."""
        with self.store.reading() as s:
            total = s.execute(select(func.count()).select_from(sc.RunRow)
                              .where(sc.RunRow.agent_id == agent_id, visible(sc.RunRow.id))).scalar_one()
            rows = s.execute(select(sc.RunRow).where(sc.RunRow.agent_id == agent_id, visible(sc.RunRow.id))
                             .order_by(sc.RunRow.started_at.desc(), sc.RunRow.id)
                             .offset(offset).limit(limit)).scalars().all()
            pending = pending_by(s, sc.ApprovalRow.run_id, [r.id for r in rows])
            held = read_many(s, [r.id for r in rows])
            return Page(tuple(convert.run(r, pending.get(r.id, 0), *_held(held[r.id])) for r in rows), offset,
                        total)

    def run(self, run_id: str) -> rm.Run:
        """One run, fresh from the store (a tree row's dataChanged, the timeline's header)."""
        with self.store.reading() as s:
            row = s.get(sc.RunRow, run_id)
            if row is None or _staged(s, run_id):
                self._missing(EntityKind.RUN, run_id)
            pending = pending_by(s, sc.ApprovalRow.run_id, [row.id])
            return convert.run(row, pending.get(row.id, 0), *_held(read_in(s, row.id)))

    def agent(self, agent_id: str) -> rm.Agent:
        """One agent with its roll-ups (pending approvals, run count), fresh from the store."""
        with self.store.reading() as s:
            row = s.get(sc.AgentRow, agent_id)
            if row is None or _staged(s, agent_id):
                self._missing(EntityKind.AGENT, agent_id)
            pending = pending_by(s, sc.ApprovalRow.agent_id, [row.id])
            runs = s.execute(select(func.count()).select_from(sc.RunRow)
                             .where(sc.RunRow.agent_id == row.id, visible(sc.RunRow.id))).scalar_one()
            return convert.agent(row, pending.get(row.id, 0), runs)

    @staticmethod
    def _missing(entity: str, entity_id: str) -> NoReturn:
        raise NotFound(f"There is no {entity} with id {entity_id}.")

    def locate(self, entity: EntityKind, entity_id: str) -> Location:
        with self.store.reading() as s:
            span_id = None
            if entity == EntityKind.SPAN:
                span = s.get(sc.SpanRow, entity_id) or self._missing(entity, entity_id)
                span_id, entity, entity_id = span.id, EntityKind.RUN, span.run_id
            if entity == EntityKind.APPROVAL:
                appr = s.get(sc.ApprovalRow, entity_id) or self._missing(entity, entity_id)
                span_id, entity, entity_id = appr.span_id, EntityKind.RUN, appr.run_id
            table = {EntityKind.PROJECT: sc.ProjectRow, EntityKind.TASK: sc.TaskRow,
                     EntityKind.SESSION: sc.SessionRow, EntityKind.AGENT: sc.AgentRow,
                     EntityKind.RUN: sc.RunRow}.get(entity)
            row = s.get(table, entity_id) if table is not None else None
            if row is None or _staged(s, entity_id):
                self._missing(entity, entity_id)
            if isinstance(row, sc.ProjectRow):
                return Location(row.id)
            if isinstance(row, sc.TaskRow):
                return Location(row.project_id, row.id)
            if isinstance(row, sc.SessionRow):
                return Location(row.project_id, row.task_id, row.id)
            assert isinstance(row, sc.AgentRow | sc.RunRow)
            agent_id = row.id if isinstance(row, sc.AgentRow) else row.agent_id
            chain = self._agent_chain(s, agent_id)
            run_id = row.id if isinstance(row, sc.RunRow) else None
            return Location(row.project_id, row.task_id, row.session_id, chain, run_id, span_id)

    @staticmethod
    def _agent_chain(s: Session, agent_id: str) -> tuple[str, ...]:
        chain: list[str] = []
        current: str | None = agent_id
        while current is not None and current not in chain:
            chain.append(current)
            current = s.execute(select(sc.AgentRow.parent_agent_id)
                                .where(sc.AgentRow.id == current)).scalar()
        return tuple(reversed(chain))

    def span_table(self, run_id: str, span_ids: Sequence[str] | None = None) -> SpanTable:
        """A run's span columns; with `span_ids`, only those spans (a live view's changed rows)."""
        S = sc.SpanRow
        columns = (S.id, S.parent_span_id, S.kind, S.name, S.status, S.started_at, S.ended_at,
                   S.input_tokens, S.output_tokens, S.cost_usd)
        rows: Sequence[Any]
        with self.store.reading() as s:
            if span_ids is None:
                rows = s.execute(select(*columns).where(S.run_id == run_id)
                                 .order_by(S.started_at, S.id)).all()
            else:  # by primary key (the run index would scan the whole run), in chunks of bound parameters
                wanted = list(span_ids)
                rows = [row[:-1] for n in range(0, len(wanted), 500)
                        for row in s.execute(select(*columns, S.run_id).where(S.id.in_(wanted[n:n + 500])))
                        if row[-1] == run_id]
        cols: list[Any] = list(zip(*rows, strict=True)) if rows else [[] for _ in range(10)]
        cols[5], cols[6] = ns_column(cols[5]), ns_column(cols[6], open_ends=True)  # nanoseconds; unreadable…
        return SpanTable(*[list(c) for c in cols])

    def span(self, span_id: str) -> rm.Span:
        with self.store.reading() as s:
            row = s.get(sc.SpanRow, span_id)
            if row is None or _staged(s, row.run_id):
                self._missing("span", span_id)
            return convert.span(row)

    def sent_context(self, span_id: str) -> list[rm.SentItem]:
        """Exactly the item revisions a model call sent, in the order it sent them."""
        L, R, Item = sc.SpanContextRow, sc.ContextItemRevisionRow, sc.ContextItemRow
        with self.store.reading() as s:
            rows = s.execute(
                select(L.item_id, L.item_revision, L.position, Item.kind, Item.role, R.content)
                .join(R, (R.item_id == L.item_id) & (R.revision == L.item_revision))
                .join(Item, Item.id == L.item_id).where(L.span_id == span_id).order_by(L.position)).all()
            if not rows and readback.is_imported_span(span_id):  # OTel spans keep their messages themselves
                return readback.sent_items(span_id, s.execute(
                    select(sc.SpanRow.attributes).where(sc.SpanRow.id == span_id)).scalar())
        return [rm.SentItem(*row) for row in rows]

    def approvals(self, status: str | None = rm.ApprovalStatus.PENDING, limit: int = 1000) -> list[rm.Approval]:
        A = sc.ApprovalRow
        query = (select(A, sc.AgentRow.name, sc.ProjectRow.name)
                 .join(sc.AgentRow, sc.AgentRow.id == A.agent_id)
                 .join(sc.ProjectRow, sc.ProjectRow.id == A.project_id))
        if status is not None and status != "all":
            query = query.where(A.status == status)
        order = A.created_at if status == "pending" else A.created_at.desc()
        with self.store.reading() as s:
            rows = s.execute(query.order_by(order, A.id).limit(limit)).all()
            return [convert.approval(a, agent, proj) for a, agent, proj in rows]

    def span_decisions(self, span_id: str, limit: int = 20) -> list[rm.Approval]:
        """The approvals asked from this span, newest first (the span details show who decided them)."""
        A = sc.ApprovalRow
        with self.store.reading() as s:
            rows = s.execute(select(A).where(A.span_id == span_id).order_by(A.created_at.desc(), A.id)
                             .limit(limit)).scalars().all()
            return [convert.approval(a) for a in rows]

    def approval(self, approval_id: str) -> rm.Approval:
        return read_approval(self.store, approval_id)

    def context(self, agent_id: str) -> rm.AgentContext:
        with self.store.reading() as s:
            agent = s.get(sc.AgentRow, agent_id)
            if agent is None:
                self._missing("agent", agent_id)
            groups = s.execute(select(sc.ContextGroupRow).where(sc.ContextGroupRow.agent_id == agent_id)
                               .order_by(sc.ContextGroupRow.ordinal)).scalars().all()
            items = s.execute(select(sc.ContextItemRow)
                              .where(sc.ContextItemRow.agent_id == agent_id,
                                     sc.ContextItemRow.removed.is_(False))
                              .order_by(sc.ContextItemRow.position, sc.ContextItemRow.summary_of.is_(None),
                                        sc.ContextItemRow.created_at)).scalars().all()
            comps = s.execute(select(sc.CompactionRow).where(sc.CompactionRow.agent_id == agent_id)
                              .order_by(sc.CompactionRow.created_at)).scalars().all()
            used = {i.group_id for i in items}  # an undone compaction's group is left empty: not shown
            shown = [g for g in groups if g.kind != "compaction" or g.id in used]
            return rm.AgentContext(agent.id, agent.context_revision, agent.context_budget,
                                   tuple(convert.group(g) for g in shown),
                                   tuple(convert.item(i) for i in items),
                                   tuple(convert.compaction(c) for c in comps))

    def audit_records(self, limit: int = 100) -> list[rm.AuditRecord]:
        with self.store.reading() as s:
            rows = s.execute(select(sc.AuditRow).order_by(sc.AuditRow.seq.desc())
                             .limit(limit)).scalars().all()
            return [convert.audit(r) for r in rows]


def _held(control: RunControl) -> tuple[str, str]:
    """A run's control state and its one-line note, for the read model (store/control)."""
    return control.state.value, "" if control.set_by is None else control.describe()
