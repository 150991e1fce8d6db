"""Critical path and search on runs of 100,000 / 300,000 / 1,000,000 spans; exits 1 when a target is missed.

Each size gets a fresh store from `store.sim.generator.populate_bulk` (bulk inserts; the
triggers of migration 0006 only mark spans dirty). Then the whole dirty set is indexed
(`indexer.drain`, timed, for information: the window does it in the background), and
searches run on the drained index. Measured, each the median of three:
  - critical path: the computation on the columns the timeline already holds (target <= 1 s at 1M),
    and, for information, the span-table read it starts from;
  - search: `search_run` for typical queries, ids returned in start order (target <= 1 s each at 1M):
    a rare word, a common word, `kind:tool`, `status:error`, `dur>2s`, a key:value attribute term.
Run with --sizes 100000 to try one size. Report `uptime` beside the figures: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import text

from agentdesk.store.analysis.columns import path_columns
from agentdesk.store.analysis.critical_path import critical_path, summarise
from agentdesk.store.native import NativeSource
from agentdesk.store.search.indexer import drain
from agentdesk.store.search.query import words_of
from agentdesk.store.search.run_search import search_run
from agentdesk.store.sim.generator import populate_bulk

SIZES = (100_000, 300_000, 1_000_000)
TARGET_AT = 1_000_000
CRITICAL_PATH_TARGET_S = 1.0
SEARCH_TARGET_S = 1.0


def median_time(fn: Callable[[], object], repeat: int = 3) -> tuple[object, float]:
    times, result = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - began)
    return result, statistics.median(times)


def queries(source: NativeSource, run_id: str) -> dict[str, str]:
    """Queries drawn from the run itself: a word from one span name (rare) and the commonest tool name."""
    with source.store.engine.connect() as conn:
        tool = conn.execute(text("SELECT name FROM spans WHERE run_id = :r AND kind = 'tool' GROUP BY name "
                                 "ORDER BY count(*) DESC LIMIT 1"), {"r": run_id}).scalar() or "tool"
        rare = conn.execute(text("SELECT name FROM spans WHERE run_id = :r GROUP BY name "
                                 "ORDER BY count(*) ASC LIMIT 1"), {"r": run_id}).scalar() or "x"
        attribute = conn.execute(text("SELECT key, value FROM spans, json_each(spans.attributes) "
                                      "WHERE run_id = :r AND json_valid(attributes) AND type = 'text' LIMIT 1"),
                                 {"r": run_id}).first()
    out = {"rare name": f'"{rare}"', "common tool": str(tool), "kind:tool": "kind:tool",
           "status:error": "status:error", "dur>2s": "dur>2s", "kind:tool dur<1s": "kind:tool dur<1s"}
    if attribute is not None:
        key, value = attribute
        word = next(iter(words_of(str(value))), "x")
        out["attribute"] = f"{key}:{word}"
    return out


def bench_size(spans: int, folder: Path) -> list[tuple[str, float, float | None]]:
    """(label, seconds, target or None) rows for one size."""
    source = NativeSource.open(str(folder / f"bench-{spans}.sqlite"))
    rows: list[tuple[str, float, float | None]] = []
    try:
        began = time.perf_counter()
        result = populate_bulk(source.store, projects=1, runs=20, big_run_spans=spans, detailed_runs=10)
        rows.append(("populate (triggers mark spans dirty)", time.perf_counter() - began, None))
        run_id = result.big_run_id
        tool = queries(source, run_id)["common tool"]
        began = time.perf_counter()  # right after an import: the search indexes 5,000 spans, scans the rest
        cold = search_run(source, run_id, tool)
        rows.append((f"search [{tool}] before the window indexed ({cold.total:,} spans, information)",
                     time.perf_counter() - began, None))
        began = time.perf_counter()
        indexed = drain(source.store.write_engine)
        rows.append((f"index the dirty set ({indexed:,} spans, information)", time.perf_counter() - began, None))
        table, read_s = median_time(lambda: source.span_table(run_id), repeat=1)
        assert len(table) >= spans, f"the run has {len(table)} spans, not {spans}"  # type: ignore[arg-type]
        rows.append(("span table read (information)", read_s, None))
        columns = path_columns(table)  # type: ignore[arg-type]
        path, path_s = median_time(lambda: critical_path(*columns))
        target = CRITICAL_PATH_TARGET_S if spans >= TARGET_AT else None
        rows.append((f"critical path ({summarise(path, table.kinds).describe()})", path_s, target))  # type: ignore
        for label, query in queries(source, run_id).items():
            found, search_s = median_time(lambda q=query: search_run(source, run_id, q))  # type: ignore[misc]
            hits = found.total  # type: ignore[attr-defined]
            rows.append((f"search {label} [{query}] -> {hits:,} spans", search_s,
                         SEARCH_TARGET_S if spans >= TARGET_AT else None))
    finally:
        source.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=lambda s: tuple(int(x) for x in s.split(",")), default=SIZES)
    args = parser.parse_args()
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1/5/15 min), "
          f"{os.cpu_count()} cores")
    missed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="agentdesk-analysis-bench-") as tmp:
        for spans in args.sizes:
            print(f"\n{spans:,} spans")
            for label, seconds, target in bench_size(spans, Path(tmp)):
                verdict = ""
                if target is not None:
                    ok = seconds <= target
                    verdict = f"  target <= {target:g} s {'met' if ok else 'MISSED'}"
                    if not ok:
                        missed.append(f"{label} at {spans:,}: {seconds:.3f} s")
                print(f"  {label:<70} {seconds * 1000:9.1f} ms{verdict}")
    if missed:
        print("\nmissed targets:\n  " + "\n  ".join(missed))
        return 1
    print("\nall targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
