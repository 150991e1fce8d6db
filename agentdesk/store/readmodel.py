"""The canonical read model: plain frozen values every view consumes.

Views never see ORM rows or live sessions. Every source (agentdesk's own schema,
later the seed runtimes' databases) fills these same types, so a view written
against them works for every backend.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Generic, TypeVar

# Statuses and kinds are StrEnums, so they compare equal to (and print as) their plain values.
# `Approval.status` holds an `ApprovalStatus`: only the store's commands set it, so the set is closed.
# The others name the values views know; runs', spans' and items' fields stay `str` because runtimes
# (ours through `AgentRuntime`, and the foreign ones) may write values outside them, which views must
# still show (a timeline draws an unknown span kind as "internal" and prints its name).


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class SpanKind(StrEnum):
    AGENT = "agent"
    MODEL = "model"
    TOOL = "tool"
    SUB_AGENT = "sub_agent"
    GUARDRAIL = "guardrail"
    GATE = "gate"
    INTERNAL = "internal"


class SpanStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    CANCELLED = "cancelled"
    RUNNING = "running"


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    WITHDRAWN = "withdrawn"
    """The requesting agent stopped waiting and took it back (`commands.withdraw`)."""


class ItemKind(StrEnum):
    MESSAGE = "message"
    TOOL_CALLS = "tool_calls"
    RESULT = "result"
    COMPACTION = "compaction"


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class Project:
    id: str
    name: str
    status: str
    created_at: datetime
    revision: int
    pending_approvals: int = 0
    task_count: int = 0


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    project_id: str
    title: str
    status: str
    created_at: datetime
    revision: int
    pending_approvals: int = 0


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    project_id: str
    task_id: str
    title: str
    status: str
    created_at: datetime
    ended_at: datetime | None
    revision: int
    pending_approvals: int = 0


@dataclass(frozen=True, slots=True)
class Agent:
    id: str
    project_id: str
    task_id: str
    session_id: str
    parent_agent_id: str | None
    name: str
    model: str
    status: str
    context_revision: int
    context_budget: int
    created_at: datetime
    revision: int
    pending_approvals: int = 0
    run_count: int = 0


@dataclass(frozen=True, slots=True)
class Run:
    id: str
    project_id: str
    task_id: str
    session_id: str
    agent_id: str
    title: str
    status: str
    started_at: datetime
    ended_at: datetime | None
    error: str | None
    usage: Usage
    revision: int
    pending_approvals: int = 0
    control: str = "running"
    """The operator's hold on the run (store/control): running, paused, stopping or stopped."""
    control_note: str = ""
    """Who set it, when and why, in one line ("paused by alice at 07:31:02 UTC: lunch"); empty when never held."""


@dataclass(frozen=True, slots=True)
class Span:
    id: str
    run_id: str
    parent_span_id: str | None
    kind: str
    name: str
    status: str
    started_at: datetime
    ended_at: datetime | None
    usage: Usage
    attributes: dict[str, Any]
    input_text: str | None
    output_text: str | None
    error: str | None
    context_revision: int | None = None

    @property
    def duration_s(self) -> float | None:
        if self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    run_id: str
    span_id: str | None
    tool_name: str
    arguments: str
    status: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Approval:
    id: str
    tool_call_id: str | None
    project_id: str
    task_id: str
    session_id: str
    agent_id: str
    run_id: str
    span_id: str | None
    tool_name: str
    arguments: str
    payload_hash: str
    status: ApprovalStatus
    created_at: datetime
    expires_at: datetime | None
    decided_at: datetime | None
    decided_by: str | None
    reason: str | None
    edited_arguments: str | None
    edited_hash: str | None
    agent_name: str = ""
    project_name: str = ""
    context_revision: int | None = None
    decided_by_rule: str | None = None
    """The standing rule that decided it, if a rule did."""
    requester_heartbeat_at: datetime | None = None
    """Last "still waiting" from the requester; None for requesters (and foreign systems) that never beat."""
    decided_login: str | None = None
    """PostgreSQL: the database login that decided it, recorded by the server (who decided); `decided_by` is the
    name typed beside it, a display label. None on SQLite (one user) and for foreign systems."""
    requested_login: str | None = None
    """PostgreSQL: the database login that requested it, recorded by the server."""

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    @property
    def decider(self) -> str | None:
        """Who decided, as shown: the signed login, with the typed name beside it when it says something else
        ("bob (typed: alice)"); just the typed name where there are no logins (SQLite, foreign systems)."""
        if self.decided_login is None:
            return self.decided_by
        if self.decided_by is None or self.decided_by == self.decided_login:
            return self.decided_login
        return f"{self.decided_login} (typed: {self.decided_by})"


def awaiting_decision(approvals: Iterable[Approval], now: datetime) -> list[Approval]:
    """The approvals an operator can still decide: pending and not past their deadline.

    A pending row past its deadline that no one has swept yet (`expire_overdue`) is expired to everyone:
    the window's "N pending" and `agentdesk approvals` count with this one function (issue 21: the window
    said 30 where the CLI said 25)."""
    return [a for a in approvals if a.status == ApprovalStatus.PENDING and not a.is_expired(now)]


def overdue(approvals: Iterable[Approval], now: datetime) -> list[Approval]:
    """Pending rows past their deadline, not yet swept: listed and counted as expired."""
    return [a for a in approvals if a.status == ApprovalStatus.PENDING and a.is_expired(now)]


@dataclass(frozen=True, slots=True)
class ContextGroup:
    id: str
    agent_id: str
    ordinal: int
    kind: str
    revision: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ContextItem:
    id: str
    agent_id: str
    group_id: str
    position: int
    kind: str
    role: str | None
    content: str
    visible: bool
    locked: bool
    revision: int
    token_estimate: int
    compaction_id: str | None
    """Set when a live compaction covers (hides) this item."""
    summary_of: str | None = None
    """For a compaction item: the id of the compaction it summarises."""
    created_at: datetime | None = None

    @property
    def effective_visible(self) -> bool:
        return self.visible and self.compaction_id is None


@dataclass(frozen=True, slots=True)
class Compaction:
    id: str
    agent_id: str
    summary_item_id: str
    covered_item_ids: tuple[str, ...]
    focus: str
    source_revision: int
    created_at: datetime
    created_by: str
    undone_at: datetime | None


@dataclass(frozen=True, slots=True)
class AgentContext:
    """One consistent snapshot of an agent's context window."""

    agent_id: str
    context_revision: int
    budget: int
    groups: tuple[ContextGroup, ...]
    items: tuple[ContextItem, ...]
    """Items in order; covered items are included (with compaction_id set)."""
    compactions: tuple[Compaction, ...] = field(default=())

    @property
    def visible_tokens(self) -> int:
        return sum(i.token_estimate for i in self.items if i.effective_visible)


@dataclass(frozen=True, slots=True)
class SentItem:
    """One item exactly as a model call saw it (content at the revision it was sent)."""

    item_id: str
    revision: int
    position: int
    kind: str
    role: str | None
    content: str


@dataclass(frozen=True, slots=True)
class AuditRecord:
    seq: int
    at: datetime
    actor: str
    action: str
    entity: str
    entity_id: str
    payload: str
    prev_hash: str
    hash: str


@dataclass(frozen=True, slots=True)
class StoreInfo:
    kind: str
    url: str
    schema_version: str | None
    read_only: bool
    counts: dict[str, int]


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: tuple[T, ...]
    offset: int
    total: int

    @property
    def has_more(self) -> bool:
        return self.offset + len(self.items) < self.total


@dataclass(frozen=True, slots=True)
class SpanTable:
    """Columns of a run's spans, without their large texts: what the waterfall needs, fast."""

    ids: list[str]
    parent_ids: list[str | None]
    kinds: list[str]
    names: list[str]
    statuses: list[str]
    starts: list[float]
    ends: list[float | None]
    input_tokens: list[int]
    output_tokens: list[int]
    costs: list[float]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True, slots=True)
class Location:
    """Where an entity sits in the tree, from the project down."""

    project_id: str
    task_id: str | None = None
    session_id: str | None = None
    agent_ids: tuple[str, ...] = ()
    """The agent chain from the top-level agent down to the entity's agent."""
    run_id: str | None = None
    span_id: str | None = None


class ControlState(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    STOPPING = "stopping"
    """A stop was asked for; the agent has not reached a checkpoint yet."""
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class RunControl:
    """What a run's controls show and what an agent's checkpoint acts on."""

    run_id: str
    state: ControlState
    set_by: str | None = None
    set_at: float | None = None
    reason: str | None = None
    held_at: float | None = None
    """When the agent reported itself blocked at a checkpoint (paused only)."""
    set_login: str | None = None
    """The server-known login that set it (PostgreSQL); `set_by` is the name it typed."""

    @property
    def who(self) -> str:
        """Who set it, as approvals say who decided: "bob (typed: alice)" where the login differs."""
        if self.set_login and self.set_login != self.set_by:
            return f"{self.set_login} (typed: {self.set_by})"
        return self.set_by or "an operator"

    @property
    def held(self) -> bool:
        return self.state is ControlState.PAUSED and self.held_at is not None

    def describe(self) -> str:
        """One line for a status bar or the CLI: "paused by alice at 07:31:02 UTC (agent blocked): lunch"."""
        if self.state is ControlState.RUNNING and self.set_by is None:
            return "running"
        at = "" if self.set_at is None else \
            f" at {datetime.fromtimestamp(self.set_at, UTC).strftime('%H:%M:%S UTC')}"
        verb = {ControlState.RUNNING: "resumed", ControlState.PAUSED: "paused",
                ControlState.STOPPING: "stop requested", ControlState.STOPPED: "stopped"}[self.state]
        blocked = " (agent blocked at a checkpoint)" if self.held else ""
        why = f": {self.reason}" if self.reason else ""
        return f"{verb} by {self.who}{at}{blocked}{why}"
