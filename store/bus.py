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
from dataclasses import dataclass, field, replace

log = logging.getLogger(__name__)

RESET = "reset"
"""Op of a synthetic change telling subscribers to reload everything (feed gap, reconnect)."""


@dataclass(frozen=True, slots=True)
class Change:
    entity: str
    op: str
    id: str
    parents: Mapping[str, str] = field(default_factory=dict)
    revision: int | None = None
    seq: int | None = None
    origin: str = ""
    at: float = 0.0

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
    merged: dict[tuple[str, str], Change] = {}
    for change in changes:
        key = (change.entity, change.id)
        earlier = merged.get(key)
        if earlier is not None and earlier.op == "insert":
            if change.op == "delete":
                del merged[key]
                continue
            change = replace(change, op="insert")
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
