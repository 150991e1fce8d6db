"""The source protocol: what every backend (our schema, later the seed runtimes) offers views.

A source answers read queries with read-model values (`SourceReader`), says what
it is and which operator commands it supports (`SourceLifecycle`: its
capabilities, so the UI can disable the rest with a reason) and publishes changes
on its bus. Commands are separate protocols (`ApprovalWriter`, `ContextWriter`):
a source implements only those it can carry out, so a read-only foreign source
has no write methods at all, and callers ask `approval_writer(source)` instead
of checking concrete classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from agentdesk.store import readmodel as rm
from agentdesk.store.audit import ChainReport
from agentdesk.store.errors import Unsupported
from agentdesk.store.persistence.bus import ChangeBus, EntityKind
from agentdesk.store.readmodel import Location, Page, RunControl, SpanTable


class Capability(StrEnum):
    APPROVE = "approve"
    DENY = "deny"
    EDIT_ARGUMENTS = "edit_arguments"
    EXPIRE = "expire"
    SET_VISIBILITY = "set_visibility"
    LOCK = "lock"
    EDIT_ITEM = "edit_item"
    COMPACT = "compact"
    UNDO_COMPACTION = "undo_compaction"
    SEND_MESSAGE = "send_message"
    """Queue an operator's message for an agent (store/messages; lensagent's pending_messages)."""
    CONTROL_RUN = "control_run"
    """Pause, resume and stop a run (store/control): the agent honours them at its checkpoints."""


@dataclass(frozen=True, slots=True)
class SourceDescriptor:
    """What a source is, cheaply: shown in the title and status bar, and by `agentdesk info`."""

    kind: str
    """`agentdesk`, or the foreign runtime that wrote the database (lensagent, stageflow, ...)."""
    location: str
    read_only: bool
    schema_version: str | None
    notes: str = ""
    """What this source cannot keep in step or does not have, in one sentence for the operator."""


class Watcher(Protocol):
    """Publishes other processes' commits on the source's bus from a background thread."""

    healthy: bool
    last_change_at: float | None

    def stop(self) -> None: ...


class SourceLifecycle(Protocol):
    """What a source is and how it lives: its bus, what it can do, watching, closing."""

    @property
    def bus(self) -> ChangeBus: ...
    @property
    def descriptor(self) -> SourceDescriptor: ...
    @property
    def capabilities(self) -> frozenset[Capability]: ...
    def why_not(self, capability: Capability) -> str:
        """Why a command is unavailable, for a disabled button's tooltip ("" when it is available)."""
        ...
    def info(self) -> rm.StoreInfo: ...
    def showcase_run(self) -> str | None: ...
    def expire_overdue(self) -> list[str]: ...
    def verify(self) -> ChainReport: ...

    def watch(self, poll_interval_s: float | None = None) -> Watcher: ...
    @property
    def watcher(self) -> Watcher | None: ...
    def close(self) -> None: ...


class SourceReader(Protocol):
    """Read queries, answered with read-model values; every source implements all of them."""

    def projects(self) -> list[rm.Project]: ...
    def tasks(self, project_id: str) -> list[rm.Task]: ...
    def sessions(self, task_id: str) -> list[rm.Session]: ...
    def agents(self, session_id: str) -> list[rm.Agent]: ...
    def runs(self, agent_id: str, offset: int = 0, limit: int = 200) -> Page[rm.Run]: ...
    def run(self, run_id: str) -> rm.Run:
        """One run, fresh (a tree row's dataChanged, the timeline's header); `NotFound` if absent."""
        ...
    def agent(self, agent_id: str) -> rm.Agent:
        """One agent, fresh (the context header names it); `NotFound` if absent."""
        ...
    def locate(self, entity: EntityKind, entity_id: str) -> Location: ...

    def span_table(self, run_id: str, span_ids: Sequence[str] | None = None) -> SpanTable:
        """A run's span columns; with `span_ids`, only those of them that exist in the run.

        The subset form is how a live timeline refreshes: it asks for the spans a
        change batch named, not the whole run again.
        """
        ...
    def span(self, span_id: str) -> rm.Span: ...
    def sent_context(self, span_id: str) -> list[rm.SentItem]: ...

    def approvals(self, status: rm.ApprovalStatus | None = rm.ApprovalStatus.PENDING,
                  limit: int = 1000) -> list[rm.Approval]:
        """Approvals in `status` (None: every status), pending ones oldest first, the others newest first."""
        ...
    def approval(self, approval_id: str) -> rm.Approval: ...

    def context(self, agent_id: str) -> rm.AgentContext: ...


@runtime_checkable
class Source(SourceLifecycle, SourceReader, Protocol):
    """Every backend: lifecycle plus reads. Writes are the separate writer protocols below."""


@runtime_checkable
class ApprovalWriter(Protocol):
    """A source that can record an operator's decision (whether it may right now: `capabilities`)."""

    def decide(self, approval_id: str, approve: bool, actor: str, reason: str | None = None,
               edited_arguments: str | None = None, *,
               expected_arguments_hash: str | None = None) -> rm.Approval: ...


@runtime_checkable
class ContextWriter(Protocol):
    """A source that can edit an agent's context window (which edits: `capabilities`)."""

    def set_group_visibility(self, group_id: str, visible: bool, expected_revision: int,
                             actor: str) -> None: ...
    def set_item_locked(self, item_id: str, locked: bool, expected_revision: int, actor: str) -> None: ...
    def edit_item(self, item_id: str, content: str, expected_revision: int, actor: str) -> None: ...
    def compact(self, agent_id: str, item_ids: Sequence[str], summary: str, focus: str,
                expected_context_revision: int, actor: str) -> str: ...
    def undo_compaction(self, compaction_id: str, actor: str) -> None: ...


@runtime_checkable
class RunController(Protocol):
    """A source whose runs an operator can pause, resume and stop (whether it may right now: `capabilities`).

    Each returns the run's control state after the write; a refused transition raises one sentence."""

    def pause_run(self, run_id: str, actor: str, reason: str | None = None) -> RunControl: ...
    def resume_run(self, run_id: str, actor: str, reason: str | None = None) -> RunControl: ...
    def stop_run(self, run_id: str, actor: str, reason: str | None = None) -> RunControl: ...
    def run_control(self, run_id: str) -> RunControl: ...


@runtime_checkable
class LimitedRunController(Protocol):
    """A `RunController` that can take only some of pause / resume / stop (lensagent: stop only)."""

    def why_not_run_action(self, action: str) -> str:
        """Why `action` ("pause", "resume", "stop") can never be taken on this source's runs ("" when it can)."""
        ...


def run_action_why_not(source: object, action: str) -> str:
    """Why this source can never take `action` on a run, whatever the run's state ("" for a full controller)."""
    return source.why_not_run_action(action) if isinstance(source, LimitedRunController) else ""


def run_controller(source: object) -> RunController | None:
    """The source as a `RunController`, or None for a source whose runs cannot be paused or stopped."""
    return source if isinstance(source, RunController) else None


def require_run_controller(source: Source) -> RunController:
    """The controller, or `Unsupported` saying why not: for callers about to pause, resume or stop."""
    controller = run_controller(source)
    if controller is None or Capability.CONTROL_RUN not in source.capabilities:
        raise Unsupported(source.why_not(Capability.CONTROL_RUN) or "This source cannot pause or stop runs.")
    return controller


def approval_writer(source: object) -> ApprovalWriter | None:
    """The source as an `ApprovalWriter`, or None for a source that cannot write decisions at all."""
    return source if isinstance(source, ApprovalWriter) else None


def context_writer(source: object) -> ContextWriter | None:
    """The source as a `ContextWriter`, or None for a source that cannot edit contexts at all."""
    return source if isinstance(source, ContextWriter) else None


def require_approval_writer(source: Source) -> ApprovalWriter:
    """The writer, or `Unsupported` saying why not: for callers about to decide."""
    writer = approval_writer(source)
    if writer is None:
        raise Unsupported(source.why_not(Capability.APPROVE) or "This source cannot record decisions.")
    return writer


def require_context_writer(source: Source, capability: Capability) -> ContextWriter:
    """The writer, or `Unsupported` saying why not: for callers about to edit a context."""
    writer = context_writer(source)
    if writer is None:
        raise Unsupported(source.why_not(capability) or "This source cannot edit contexts.")
    return writer


def decide(source: Source, approval_id: str, approve: bool, actor: str, reason: str | None = None,
           edited_arguments: str | None = None, *, expected_arguments_hash: str | None = None) -> rm.Approval:
    """Record a decision through the source's writer; `Unsupported` when the source has none.

    `expected_arguments_hash` is the hash of the arguments the operator was shown: the writer
    refuses the decision as stale when the stored arguments hash differently."""
    return require_approval_writer(source).decide(approval_id, approve, actor, reason, edited_arguments,
                                                  expected_arguments_hash=expected_arguments_hash)
