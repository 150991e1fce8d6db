"""The skeletons of traces this process is receiving, kept between writes: a late request reads none.

Why: a live exporter sends a trace in many requests, and each write to a trace already stored decides
over the whole trace (`correction`). Reading the stored spans' skeleton for that (`skeleton.load`: one
statement, but a JSON extraction per span) on every request made a trace spread over n requests cost
O(n²) extractions: four raw clients were stored at 1,921 spans/s against 22,542 accepted. The writer
knows what it stores, so it keeps the skeleton as it leaves it and the next write to the trace starts
from there.

A kept skeleton is used only while it is provably the stored one: it is tagged with the run's revision
the write committed (every write of a trace bumps it once, in the roll-up), kept only after the commit
(a rolled-back write keeps nothing), and a write that finds another revision (another process wrote the
trace, or this one's commit is unknown) reads the skeleton again. Per store (a process may open several)
and bounded in spans, least recently used first out.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

from agentdesk.store.ingest.skeleton import StoredSpan
from agentdesk.store.persistence.database import Store

MAX_SPANS = 200_000
"""Spans kept over all traces of a store (a few hundred bytes each): the traces being received now."""

Skeleton = dict[str, StoredSpan]
"""OTel span id -> its stored skeleton."""


class SkeletonCache:
    """Run id -> (revision, skeleton) for one store."""

    def __init__(self, max_spans: int = MAX_SPANS) -> None:
        self.max_spans = max_spans
        self._kept: OrderedDict[str, tuple[int, Skeleton]] = OrderedDict()
        self._spans = 0
        self._lock = threading.Lock()  # a window's receiver and an import may write from two threads

    def get(self, run_id: str, revision: int | None) -> Skeleton | None:
        """A copy of the skeleton kept at `revision`, or None (never kept, or the trace changed since)."""
        with self._lock:
            found = self._kept.get(run_id)
            if found is None or revision is None or found[0] != revision:
                return None
            self._kept.move_to_end(run_id)
            return dict(found[1])

    def keep(self, run_id: str, revision: int, spans: Skeleton) -> None:
        with self._lock:
            self._drop(run_id)
            if len(spans) > self.max_spans:
                return
            self._kept[run_id] = (revision, spans)
            self._spans += len(spans)
            while self._spans > self.max_spans:
                self._drop(next(iter(self._kept)))

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._drop(run_id)

    def _drop(self, run_id: str) -> None:
        gone = self._kept.pop(run_id, None)
        if gone is not None:
            self._spans -= len(gone[1])


_caches: weakref.WeakKeyDictionary[Store, SkeletonCache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def cache_of(store: Store) -> SkeletonCache:
    """The store's cache (made on first use; goes with the store)."""
    with _caches_lock:
        found = _caches.get(store)
        if found is None:
            found = _caches[store] = SkeletonCache()
        return found
