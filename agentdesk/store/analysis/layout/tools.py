"""What the timeline's critical path and find bar ask of the store and the layout, run on the runner.

Both are blocking work (a million-span walk, a query in the store), so the
panel submits these functions to `StoreRunner` and only shows their answers.
Answers are in lanes of the layout they were computed for; a newer layout
recomputes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agentdesk.store.analysis.critical_path import PathSummary
from agentdesk.store.analysis.layout.data import TimelineData
from agentdesk.store.analysis.run_path import run_path
from agentdesk.store.search.run_search import search_run
from agentdesk.store.source import Source


@dataclass(frozen=True, slots=True)
class PathLanes:
    """The run's critical path (`run_path`, what `agentdesk critical-path` prints) as lanes of one layout,
    in chronological order with their self time."""

    data: TimelineData
    lanes: np.ndarray
    self_time: np.ndarray
    share: np.ndarray
    """Each span's self time as a fraction of the run's duration."""
    total: float
    described: PathSummary
    """Spans, seconds by kind and the dominant kind: the CLI's numbers."""

    def __len__(self) -> int:
        """Lanes drawn: fewer than `described.spans` only while the layout lags a growing run."""
        return len(self.lanes)

    def summary(self) -> str:
        """For the run header, word for word the CLI's first line: "critical path: 8 spans, 83 % in approval
        gates"."""
        return self.described.describe()


@dataclass(frozen=True, slots=True)
class Matches:
    """Spans a find-bar query matched in one layout, as lanes in start order."""

    data: TimelineData
    query: str
    lanes: np.ndarray
    total: int
    """Matches in the run (some may not be laid out yet while a live run grows)."""


def path_of(source: Source, run_id: str, data: TimelineData) -> PathLanes:
    """The run's critical path computed once, as the CLI does (`run_path`), then placed on the layout's
    lanes. A span the layout does not hold yet (a live run grows) is counted but not drawn."""
    found = run_path(source, run_id)
    ids = found.table.ids
    lanes = np.fromiter((data.lane_of.get(ids[i]) for i in found.path.indices.tolist()), np.int64,
                        len(found.path))
    drawn = lanes >= 0
    return PathLanes(data, lanes[drawn], np.asarray(found.path.self_time, dtype=np.float64)[drawn],
                     np.asarray(found.path.share(), dtype=np.float64)[drawn], float(found.path.total),
                     found.summary)


def find(source: Source, run_id: str, query: str, data: TimelineData) -> Matches:
    """Run a find-bar query in the store (`search_run`; `QueryError` for a bad query) as lanes."""
    result = search_run(source, run_id, query)
    lanes = np.fromiter((data.lane_of.get(span_id) for span_id in result.span_ids), np.int64,
                        len(result.span_ids))
    lanes = lanes[lanes >= 0]
    lanes = lanes[np.argsort(data.start[lanes], kind="stable")]
    return Matches(data, query, lanes, int(result.total))
