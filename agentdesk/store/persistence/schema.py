"""agentdesk's own tables, as typed SQLAlchemy declarative models.

Times are stored as float seconds since the epoch (UTC), except a span's start and end, integer
nanoseconds (OTLP's own unit, kept exact from import to export; migration 0023). Seconds are portable across SQLite
and PostgreSQL, cheap to compare in SQL (expiry checks) and to feed to the
timeline as arrays. The hierarchy ids (project, task, session, agent) are copied
onto lower rows because they never change and it makes per-level counts (pending
approvals, status roll-ups) one indexed GROUP BY instead of a chain of joins.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Float, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from agentdesk.store.persistence.payloads import PackedText

SEQ = BigInteger().with_variant(Integer(), "sqlite")
"""The audit's and the change log's seq: bigint on PostgreSQL (migration 0012); SQLite's INTEGER is 64-bit and
must stay spelled INTEGER for its rowid alias."""
NS = BigInteger().with_variant(Integer(), "sqlite")
"""A span time in integer nanoseconds since the epoch (migration 0023; see store/text/times.py)."""


class Base(DeclarativeBase):
    pass


class ProjectRow(Base):
    __tablename__ = "projects"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    revision: Mapped[int] = mapped_column(Integer, default=1)


class TaskRow(Base):
    __tablename__ = "tasks"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id"), index=True)
    title: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    revision: Mapped[int] = mapped_column(Integer, default=1)


class SessionRow(Base):
    __tablename__ = "sessions"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id"), index=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"), index=True)
    title: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)
    revision: Mapped[int] = mapped_column(Integer, default=1)


class AgentRow(Base):
    __tablename__ = "agents"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id"), index=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"), index=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"), index=True)
    parent_agent_id: Mapped[str | None] = mapped_column(ForeignKey("agents.id"), index=True)
    name: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(String(16))
    context_revision: Mapped[int] = mapped_column(Integer, default=0)
    context_budget: Mapped[int] = mapped_column(Integer, default=128_000)
    created_at: Mapped[float] = mapped_column(Float)
    revision: Mapped[int] = mapped_column(Integer, default=1)


class RunRow(Base):
    __tablename__ = "runs"
    __table_args__ = (Index("runs_by_agent", "agent_id", "started_at"),)
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id"), index=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"), index=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"), index=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    title: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), index=True)
    started_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)
    # The run's sums pass 2**31 on a long run: 64-bit on both backends (SQLite's INTEGER is; 0022 on PostgreSQL)
    input_tokens: Mapped[int] = mapped_column(Integer().with_variant(BigInteger(), "postgresql"), default=0)
    output_tokens: Mapped[int] = mapped_column(Integer().with_variant(BigInteger(), "postgresql"), default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    revision: Mapped[int] = mapped_column(Integer, default=1)


class RunControlRow(Base):
    """An operator's hold on a run (store/control): no row means running.

    `state` is running, paused, stopping (a stop was asked for; the agent has not reached a checkpoint yet) or
    stopped. `held_at` is when the agent reported itself blocked at a checkpoint while paused."""
    __tablename__ = "run_controls"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), primary_key=True)
    state: Mapped[str] = mapped_column(String(16))
    set_by: Mapped[str] = mapped_column(Text)
    set_at: Mapped[float] = mapped_column(Float)
    reason: Mapped[str | None] = mapped_column(Text)
    set_login: Mapped[str | None] = mapped_column(Text)
    held_at: Mapped[float | None] = mapped_column(Float)
    revision: Mapped[int] = mapped_column(Integer, default=1)


class SpanRow(Base):
    __tablename__ = "spans"
    __table_args__ = (Index("spans_by_run", "run_id", "started_at"),)
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"))
    parent_span_id: Mapped[str | None] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    # Integer nanoseconds since the epoch (migration 0023), the exact OTLP times: a float's 256 ns step
    # near 1.7e18 changed three imported times in four. BIGINT on PostgreSQL, INTEGER (64-bit) on SQLite.
    started_at: Mapped[int] = mapped_column(NS, server_default=text("-1"))
    """-1 (unreadable) by default: SQLite adds a NOT NULL column only with one (migration 0023)."""
    ended_at: Mapped[int | None] = mapped_column(NS)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    attributes: Mapped[str] = mapped_column(PackedText, default="{}")
    """Stored compressed on SQLite when large (persistence/payloads.py); always read back as text."""
    input_text: Mapped[str | None] = mapped_column(Text)
    output_text: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    context_revision: Mapped[int | None] = mapped_column(Integer)


class SpanContextRow(Base):
    """Which item revisions a model-call span sent, in order: rebuilds "what the model saw"."""

    __tablename__ = "span_context_items"
    span_id: Mapped[str] = mapped_column(ForeignKey("spans.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[str] = mapped_column(String(64))
    item_revision: Mapped[int] = mapped_column(Integer)


class ToolCallRow(Base):
    __tablename__ = "tool_calls"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), index=True)
    span_id: Mapped[str | None] = mapped_column(String(64))
    tool_name: Mapped[str] = mapped_column(String(128))
    arguments: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float)


class ApprovalRow(Base):
    __tablename__ = "approvals"
    __table_args__ = (Index("approvals_by_status", "status", "created_at"),)
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    tool_call_id: Mapped[str | None] = mapped_column(ForeignKey("tool_calls.id"))
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id"))
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"))
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"))
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"))
    span_id: Mapped[str | None] = mapped_column(String(64))
    tool_name: Mapped[str] = mapped_column(String(128))
    arguments: Mapped[str] = mapped_column(Text)
    payload_hash: Mapped[str] = mapped_column(String(80))
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float | None] = mapped_column(Float)
    decided_at: Mapped[float | None] = mapped_column(Float)
    decided_by: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    edited_arguments: Mapped[str | None] = mapped_column(Text)
    edited_hash: Mapped[str | None] = mapped_column(String(80))
    context_revision: Mapped[int | None] = mapped_column(Integer)
    revision: Mapped[int] = mapped_column(Integer, default=1)
    decided_by_rule: Mapped[str | None] = mapped_column(String(64))
    """The standing rule that decided this approval (None: a person, or the runtime's expiry)."""
    requester_heartbeat_at: Mapped[float | None] = mapped_column(Float)
    """Last time the requester said it is still waiting (None: a requester that never beats)."""
    approved_hash: Mapped[str | None] = mapped_column(String(80))
    """The hash of the arguments the operator saw and approved."""
    requested_login: Mapped[str | None] = mapped_column(Text)
    """PostgreSQL: the database login that requested it, set by the server (migration 0012); SQLite: None."""
    decided_login: Mapped[str | None] = mapped_column(Text)
    """PostgreSQL: the database login whose transaction decided it, set by the server; `decided_by` is the
    name typed beside it (a display label). SQLite (one user, no logins): None."""


class AskRow(Base):
    """An agent's question to a person (migration 0015): answered exactly once, or expired, or cancelled."""

    __tablename__ = "asks"
    __table_args__ = (Index("asks_by_status", "status", "created_at"), Index("asks_by_run", "run_id"))
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id"))
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"))
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"))
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"))
    span_id: Mapped[str | None] = mapped_column(String(64))
    question: Mapped[str] = mapped_column(Text)
    options: Mapped[str | None] = mapped_column(Text)
    """A JSON array of strings, or None: the operator may answer with any text either way."""
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float | None] = mapped_column(Float)
    answered_at: Mapped[float | None] = mapped_column(Float)
    """When it closed: answered, cancelled or marked expired."""
    answered_by: Mapped[str | None] = mapped_column(Text)
    answer: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    revision: Mapped[int] = mapped_column(Integer, default=1)
    requested_login: Mapped[str | None] = mapped_column(Text)
    answered_login: Mapped[str | None] = mapped_column(Text)


class RuleRow(Base):
    """A standing allow/deny/ask rule for tool calls, scoped by tool, matcher and optionally place."""

    __tablename__ = "approval_rules"
    __table_args__ = (Index("rules_by_tool", "tool", "enabled"),)
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    effect: Mapped[str] = mapped_column(String(8))
    tool: Mapped[str] = mapped_column(String(128))
    matcher: Mapped[str] = mapped_column(Text, default="{}")
    project_id: Mapped[str | None] = mapped_column(String(64))
    agent_id: Mapped[str | None] = mapped_column(String(64))
    session_id: Mapped[str | None] = mapped_column(String(64))
    expires_at: Mapped[float | None] = mapped_column(Float)
    note: Mapped[str] = mapped_column(Text, default="")
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    revision: Mapped[int] = mapped_column(Integer, default=1)
    created_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    hit_count: Mapped[int] = mapped_column(Integer, default=0)
    last_hit_at: Mapped[float | None] = mapped_column(Float)


class RuleLookRow(Base):
    """An applier's look at an agent login's pending request on PostgreSQL (store/rules/applier.py): no row means
    no applier has looked yet. `outcome` is approved or denied (a rule decided), ask (an ask rule matched) or none
    (no rule did): the last two wait for a person. Written only by the server's functions (migration 0024)."""
    __tablename__ = "approval_rule_looks"
    approval_id: Mapped[str] = mapped_column(ForeignKey("approvals.id"), primary_key=True)
    looked_at: Mapped[float] = mapped_column(Float)
    looked_login: Mapped[str] = mapped_column(Text)
    rule_id: Mapped[str | None] = mapped_column(String(64))
    outcome: Mapped[str] = mapped_column(String(16))


class ContextGroupRow(Base):
    __tablename__ = "context_groups"
    __table_args__ = (Index("groups_by_agent", "agent_id", "ordinal"),)
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    ordinal: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))
    revision: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[float] = mapped_column(Float)


class ContextItemRow(Base):
    __tablename__ = "context_items"
    __table_args__ = (Index("items_by_agent", "agent_id", "position"),)
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    group_id: Mapped[str] = mapped_column(ForeignKey("context_groups.id"))
    position: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))
    role: Mapped[str | None] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    visible: Mapped[bool] = mapped_column(Boolean, default=True)
    locked: Mapped[bool] = mapped_column(Boolean, default=False)
    revision: Mapped[int] = mapped_column(Integer, default=1)
    token_estimate: Mapped[int] = mapped_column(Integer, default=0)
    compaction_id: Mapped[str | None] = mapped_column(String(64))
    summary_of: Mapped[str | None] = mapped_column(String(64))
    removed: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)


class ContextItemRevisionRow(Base):
    """Every content revision an item ever had, so old model calls can be replayed exactly."""

    __tablename__ = "context_item_revisions"
    item_id: Mapped[str] = mapped_column(ForeignKey("context_items.id"), primary_key=True)
    revision: Mapped[int] = mapped_column(Integer, primary_key=True)
    content: Mapped[str] = mapped_column(Text)
    token_estimate: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[float] = mapped_column(Float)


class CompactionRow(Base):
    __tablename__ = "compactions"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"), index=True)
    summary_item_id: Mapped[str] = mapped_column(String(64))
    covered_item_ids: Mapped[str] = mapped_column(Text)
    focus: Mapped[str] = mapped_column(Text)
    source_revision: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[float] = mapped_column(Float)
    created_by: Mapped[str] = mapped_column(Text)
    undone_at: Mapped[float | None] = mapped_column(Float)


class AuditRow(Base):
    """Append-only, hash-chained: each record's hash covers its content and the previous hash."""

    __tablename__ = "audit_log"
    seq: Mapped[int] = mapped_column(SEQ, primary_key=True, autoincrement=True)
    at: Mapped[float] = mapped_column(Float)
    actor: Mapped[str] = mapped_column(Text)
    action: Mapped[str] = mapped_column(String(64))
    entity: Mapped[str] = mapped_column(String(32))
    entity_id: Mapped[str] = mapped_column(String(64))
    payload: Mapped[str] = mapped_column(Text)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))
    mac: Mapped[str | None] = mapped_column(String(64))
    """HMAC-SHA256 of `hash` under the store's audit key (None: written before keying, see docs/audit.md)."""


class ChangeRow(Base):
    """Cross-process change feed: watchers in other processes read rows past their high-water mark."""

    __tablename__ = "change_log"
    seq: Mapped[int] = mapped_column(SEQ, primary_key=True, autoincrement=True)
    at: Mapped[float] = mapped_column(Float)
    origin: Mapped[str] = mapped_column(String(64))
    entity: Mapped[str] = mapped_column(String(32))
    op: Mapped[str] = mapped_column(String(16))
    entity_id: Mapped[str] = mapped_column(String(64))
    parents: Mapped[str] = mapped_column(Text, default="{}")
    revision: Mapped[int | None] = mapped_column(Integer)


class MetaRow(Base):
    """Key/value facts about the store itself (creator, schema generation)."""

    __tablename__ = "agentdesk_meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class OtelOrphanRow(Base):
    """An imported span whose OTel parent has not arrived yet: shown under its trace root until it does."""

    __tablename__ = "otel_orphans"
    span_id: Mapped[str] = mapped_column(ForeignKey("spans.id"), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), index=True)
    parent_id: Mapped[str] = mapped_column(String(64), index=True)
    """agentdesk's id of the parent span it is waiting for."""


class ImportStagingRow(Base):
    """A row an OTLP import created for a large trace it is still writing (migration 0010): hidden from
    every reader until the import's final "flip" transaction deletes these rows (docs/otel.md)."""

    __tablename__ = "import_staging"
    entity_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    """project, task, session, agent or run."""
    run_id: Mapped[str] = mapped_column(String(64), index=True)
    """The trace's run: the flip and the clean-up find every staged row of one trace by it."""
    heartbeat_at: Mapped[float] = mapped_column(Float)
    """Unix seconds of the importer's last transaction on this trace: older than STALE_S = abandoned."""


class OtelResourceRow(Base):
    """An OTel resource (service.name, host, SDK...) once, referenced by its spans' `otel.resource` key."""

    __tablename__ = "otel_resources"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    attributes: Mapped[str] = mapped_column(Text)


class NoteRow(Base):
    """An operator's free-text note on a span, a run or an approval (migration 0018_notes)."""

    __tablename__ = "notes"
    __table_args__ = (Index("notes_by_target", "target_kind", "target_id"), Index("notes_by_run", "run_id"),
                      Index("notes_by_time", "updated_at"))
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    target_kind: Mapped[str] = mapped_column(String(16))
    """span, run or approval."""
    target_id: Mapped[str] = mapped_column(String(64))
    run_id: Mapped[str] = mapped_column(String(64))
    """The run the target belongs to: the tree marks a run without a join."""
    body: Mapped[str] = mapped_column(Text)
    author: Mapped[str] = mapped_column(Text)
    author_login: Mapped[str | None] = mapped_column(Text)
    """PostgreSQL: the login that wrote it, set by the server; SQLite: None."""
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    updated_by: Mapped[str] = mapped_column(Text)
    updated_login: Mapped[str | None] = mapped_column(Text)
    revision: Mapped[int] = mapped_column(Integer, default=1)


class LabelRow(Base):
    """One label on one span, run or approval (migration 0018_notes); present or absent, never edited."""

    __tablename__ = "labels"
    __table_args__ = (Index("labels_by_run", "run_id"), Index("labels_by_time", "created_at"),
                      Index("labels_by_label", "label"))
    target_kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    target_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    label: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(64))
    author: Mapped[str] = mapped_column(Text)
    author_login: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)


class AgentTokenRow(Base):
    """An agent's bearer token for the HTTP gate (migration 0011): only its sha256 is kept."""

    __tablename__ = "agent_tokens"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    """The agent identity the token stands for, shown as the requester of what it writes."""
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    created_by: Mapped[str] = mapped_column(String(200))
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    """Set once by `agent-token revoke`; a revoked token gets 401 and its row stays for the audit."""
    last_used_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class MessageRow(Base):
    """An operator's message for an agent (migration 0016): pending until the agent takes it at its next model
    call (then delivered, as the context item `item_id`) or an operator cancels it."""

    __tablename__ = "messages"
    __table_args__ = (Index("messages_by_agent", "agent_id", "status"),
                      Index("messages_by_status", "status", "created_at"))
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    session_id: Mapped[str] = mapped_column(String(64))
    content: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    """pending, delivered or cancelled; only pending moves, and only once."""
    created_at: Mapped[float] = mapped_column(Float)
    created_by: Mapped[str] = mapped_column(Text)
    created_login: Mapped[str | None] = mapped_column(Text)
    """The server-known login that sent it (PostgreSQL); empty on SQLite, which has no logins."""
    settled_at: Mapped[float | None] = mapped_column(Float)
    settled_by: Mapped[str | None] = mapped_column(Text)
    """Who cancelled it, or the agent actor that took it."""
    item_id: Mapped[str | None] = mapped_column(String(64))
    """The context item a delivered message became."""
    revision: Mapped[int] = mapped_column(Integer, default=1)
