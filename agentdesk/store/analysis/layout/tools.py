"""What the timeline's critical path and find bar ask of the store and the layout, run on the runner.

Both are blocking work (a million-span walk, a query in the store), so the
panel submits these functions to `StoreRunner` and only shows their answers.
Answers are in lanes of the layout they were computed for; a newer layout
recomputes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agentdesk.store.analysis.critical_path import critical_path
from agentdesk.store.analysis.layout.data import KIND_CODES, TimelineData
from agentdesk.store.search.run_search import search_run
from agentdesk.store.source import Source


@dataclass(frozen=True, slots=True)
class PathLanes:
    """The critical path of one layout: lanes in chronological order with their self time."""

    data: TimelineData
    lanes: np.ndarray
    self_time: np.ndarray
    share: np.ndarray
    """Each span's self time as a fraction of the run's duration."""
    total: float
    model_share: float
    """Fraction of the path's time spent in model calls."""

    def __len__(self) -> int:
        return len(self.lanes)

    def summary(self) -> str:
        """For the run header: "critical path: 41 spans, 78 % in model calls"."""
        spans = f"{len(self):,} span{'' if len(self) == 1 else 's'}"
        return f"critical path: {spans}, {self.model_share * 100:.0f} % in model calls"


@dataclass(frozen=True, slots=True)
class Matches:
    """Spans a find-bar query matched in one layout, as lanes in start order."""

    data: TimelineData
    query: str
    lanes: np.ndarray
    total: int
    """Matches in the run (some may not be laid out yet while a live run grows)."""


def path_of(data: TimelineData) -> PathLanes:
    """The critical path over the layout's own arrays (times since run start, parents as lanes)."""
    path = critical_path(data.start, data.end, data.parent)
    lanes = np.asarray(path.indices, dtype=np.int64)
    self_time = np.asarray(path.self_time, dtype=np.float64)
    total = float(path.total)
    model = float(self_time[data.kind[lanes] == KIND_CODES["model"]].sum()) if len(lanes) else 0.0
    return PathLanes(data, lanes, self_time, np.asarray(path.share(), dtype=np.float64), total,
                     model / total if total > 0 else 0.0)


def find(source: Source, run_id: str, query: str, data: TimelineData) -> Matches:
    """Run a find-bar query in the store (`search_run`; `QueryError` for a bad query) as lanes."""
    result = search_run(source, run_id, query)
    lanes = np.fromiter((data.lane_of.get(span_id) for span_id in result.span_ids), np.int64,
                        len(result.span_ids))
    lanes = lanes[lanes >= 0]
    lanes = lanes[np.argsort(data.start[lanes], kind="stable")]
    return Matches(data, query, lanes, int(result.total))
