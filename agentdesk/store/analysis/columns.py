"""A span table as the numpy columns the critical path takes: times rebased to the run start, parent indices."""

from __future__ import annotations

import numpy as np

from agentdesk.store.readmodel import SpanTable


def path_columns(table: SpanTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, parent): float64 seconds since the first span's start (NaN end: running), int64 parent."""
    n = len(table)
    starts = np.asarray(table.starts, dtype=np.float64)
    origin = float(starts.min()) if n else 0.0
    ends = np.array([np.nan if e is None else e for e in table.ends], dtype=np.float64)
    index = {span_id: i for i, span_id in enumerate(table.ids)}
    parents = np.fromiter((index.get(p, -1) if p is not None else -1 for p in table.parent_ids),
                          dtype=np.int64, count=n)
    return starts - origin, ends - origin, parents
