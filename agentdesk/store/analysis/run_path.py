"""A stored run's critical path, read and computed once for every caller: `agentdesk critical-path`
prints it and the window's timeline (P) draws it, so the two can never show different numbers.

It reads the run's span table (any source) and walks it with `critical_path`; ties and foreign parent
cycles are resolved on the table's own order, the same for both callers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from agentdesk.store.analysis.columns import path_columns
from agentdesk.store.analysis.critical_path import CriticalPath, PathSummary, critical_path, summarise
from agentdesk.store.readmodel import SpanTable
from agentdesk.store.source import Source


@dataclass(frozen=True)
class RunPath:
    run_id: str
    table: SpanTable
    start: np.ndarray
    """Each span's start in seconds since the run's first span."""
    path: CriticalPath
    summary: PathSummary

    def rows(self) -> list[dict[str, Any]]:
        """The path as rows, in path order: what `--json` prints and the window lists."""
        table, start = self.table, self.start
        return [{"span_id": table.ids[i], "name": table.names[i], "kind": table.kinds[i],
                 "start_s": round(float(start[i]), 6), "self_s": round(t, 6), "share": round(share, 6)}
                for i, t, share in zip(self.path.indices.tolist(), self.path.self_time.tolist(),
                                       self.path.share().tolist(), strict=True)]


def run_path(source: Source, run_id: str) -> RunPath:
    """The run's critical path (`NotFound` for an unknown run)."""
    source.run(run_id)
    table = source.span_table(run_id)
    columns = path_columns(table)
    path = critical_path(*columns)
    return RunPath(run_id, table, columns[0], path, summarise(path, table.kinds))
