"""The change-notification bus: every reader learns what changed, after it was committed.

Writers publish batches of `Change` events only after their transaction commits
(the unit of work does that). Watchers turn other processes' commits into the same
events. Subscribers always receive *batches*, already coalesced, so a burst of ten
thousand writes costs a subscriber a handful of callbacks, not ten thousand.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

log = logging.getLogger(__name__)


class EntityKind(StrEnum):
    """What a change (or a `locate` question) is about.

    A StrEnum, so the change log's text column and comparisons with plain strings
    (`change.entity == "span"`) keep working, while a misspelt kind fails loudly
    the moment a change is built instead of silently matching nothing.
    """

    ALL = "*"
    """Only with `ChangeOp.RESET`: everything may have changed."""
    PROJECT = "project"
    TASK = "task"
    SESSION = "session"
    AGENT = "agent"
    RUN = "run"
    SPAN = "span"
    APPROVAL = "approval"
    TOOL_CALL = "tool_call"
    CONTEXT = "context"
    """An agent's context window as a whole (its revision moved); the id is the agent's."""
    CONTEXT_GROUP = "context_group"
    CONTEXT_ITEM = "context_item"
    COMPACTION = "compaction"
    SPAN_BATCH = "span_batch"
    """Many spans of one run at once (an import or a receiver batch); the id is the run's: views reload it once."""
    RULE = "rule"
    """A standing approval rule (store/rules)."""
    AGENT_TOKEN = "agent_token"
    """An agent's bearer token for the HTTP gate was created or revoked (store/agents/tokens.py)."""
    MESSAGE = "message"
    """An operator's message to an agent was queued, delivered or cancelled (store/messages)."""
    NOTE = "note"
    """An operator's note on a span, run or approval (store/notes); parents name the run and `target`."""
    LABEL = "label"
    """A label added to or removed from a span, run or approval; the id is `kind:target:label`."""
    ASK = "ask"
    """An agent's question to a person was asked, answered, cancelled or expired (store/asks)."""


class ChangeOp(StrEnum):
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"
    HEARTBEAT = "heartbeat"
    """The requester of a pending approval is still waiting (store/approvals/heartbeat.py): no field an operator
    reads changed except the requester's liveness."""
    RESET = "reset"
    """A synthetic change telling subscribers to reload everything (feed gap, reconnect)."""


RESET = ChangeOp.RESET


@dataclass(frozen=True, slots=True, init=False)
class Change:
    """One committed change to one entity, with the ids of the levels above it in `parents`.

    The constructor also takes the kinds' plain string values (the change log stores
    text, foreign trackers map table names) and converts them, so every `Change`
    holds real enums; an unknown kind or op raises `ValueError`.
    """

    entity: EntityKind
    op: ChangeOp
    id: str
    parents: Mapping[str, str]
    revision: int | None
    seq: int | None
    origin: str
    at: float

    def __init__(self, entity: EntityKind | str, op: ChangeOp | str, id: str,
                 parents: Mapping[str, str] | None = None, revision: int | None = None,
                 seq: int | None = None, origin: str = "", at: float = 0.0) -> None:
        set_field = object.__setattr__  # frozen: the dataclass's own __init__ does the same
        set_field(self, "entity", EntityKind(entity))
        set_field(self, "op", ChangeOp(op))
        set_field(self, "id", id)
        set_field(self, "parents", {} if parents is None else parents)
        set_field(self, "revision", revision)
        set_field(self, "seq", seq)
        set_field(self, "origin", origin)
        set_field(self, "at", at)

    def parent(self, level: str) -> str | None:
        return self.parents.get(level)


Subscriber = Callable[[Sequence[Change]], None]


def coalesce(changes: Iterable[Change]) -> list[Change]:
    """One change per (entity, id), in the order each key *first* appeared.

    First-appearance order keeps a parent's insert ahead of its children's even
    when the parent is updated again later in the batch. An insert absorbs later
    updates (the subscriber has not seen the row yet); an insert followed by a
    delete cancels out (the subscriber never needs to hear of that row). A reset
    makes every other change moot, so a batch holding one becomes just a reset.
    """
    changes = list(changes)
    resets = [c for c in changes if c.op == RESET]
    if resets:
        seqs = [c.seq for c in changes if c.seq is not None]
        return [replace(resets[-1], seq=max(seqs) if seqs else None)]
    merged: dict[tuple[EntityKind, str], Change] = {}
    for change in changes:
        key = (change.entity, change.id)
        earlier = merged.get(key)
        if earlier is not None and earlier.op == ChangeOp.INSERT:
            if change.op == ChangeOp.DELETE:
                del merged[key]
                continue
            change = replace(change, op=ChangeOp.INSERT)
        merged[key] = change
    return list(merged.values())


class ChangeBus:
    """Thread-safe publish/subscribe of change batches.

    Callbacks run on the publishing thread; a GUI bridges them onto its own thread.
    A failing subscriber is logged and never stops delivery to the others.
    """

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self.last_seq = 0

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def publish(self, changes: Sequence[Change]) -> None:
        if not changes:
            return
        seqs = [c.seq for c in changes if c.seq is not None]
        batch = coalesce(changes)
        with self._lock:
            if seqs:
                self.last_seq = max(self.last_seq, *seqs)
            subscribers = list(self._subscribers) if batch else []
        for callback in subscribers:
            try:
                callback(batch)
            except Exception:  # a broken view must not break the writer
                log.exception("change subscriber %r failed", callback)
