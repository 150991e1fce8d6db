"""Timeline benchmark: runs of 100,000 / 300,000 / 1,000,000 spans opened, painted, panned and zoomed.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/timeline_bench.py [--spans 100000,300000,1000000]
        [--steps 40] [--shots DIR] [--keep DIR] [--profile DIR]

For each size a fresh store is generated in a child process (`populate_bulk`,
bulk inserts), then measured in another child that only opens it, so the
measured process's memory is what a window showing the run holds. Every figure
is what the operator sees:

- the run is checked first: the measured run must have the span count claimed
  (a bench measuring the wrong run measured nothing);
- first spans drawn: `show_run` → the end of the first span-item paint that had
  data (`SpanItem.painted`), the first paint after the data arrived;
- all navigable: `show_run` → the end of the first paint with the whole run;
- longest GUI-thread stall while loading (gap between ticks of a 10 ms timer);
- pan and zoom frames at three zoom levels (whole run, a 2 % window, names
  readable) on the rows the run opens with (deep sub-trees collapsed), and the
  whole run again with every sub-tree expanded (one row per span): each from
  the step's start to the end of everything the event loop did to repaint (the
  whole frame: waterfall, axes, minimap and the linked tokens plot), median and
  p95;
- the process's RSS with the run shown and after the steps (psutil);
- live: one new span's layout alone, then the feed's whole refresh for a new span and for it
  finishing (`load_changes` on the runner, then the feed's swap, the panel and the repaint on the
  GUI thread, each reported; medians over `LIVE_SPANS` spans);
- the stages alone, after everything else (the page cache warm, as on opening): the store read
  (`span_columns`) and the layout (`TimelineData.from_columns`), wall and CPU seconds of the
  process (SQLite's part runs without the GIL, so CPU above wall means work beside the GUI thread).

Targets (issue 10): first spans < 1 s, navigable <= 5 s, pan/zoom p95 <= 16 ms
at every level, RSS <= 600 MB, span count as claimed. The last line names every
missed target; the exit status is 1 when one was missed.

PostgreSQL beside SQLite (issue 21): `--postgres URL` (a server's URL; `auto`:
$AGENTDESK_TEST_PG) builds the same run (same generator, same seed) in a fresh
database of that server too and measures it in its own child the same way, then
prints both backends side by side with PostgreSQL's first spans drawn and all
navigable against SQLite's: within `PG_RATIO` (1.5x) of SQLite's, else missed.
Each child opens the run twice: the first open in a fresh process (cold-ish: the
connection pool, psycopg's and the planner's caches empty), then, after showing
another run, the same run again (warm, best of `WARM_OPENS`); both are compared. `--open-only` skips
the moves, live and stage figures (the comparison needs only the opens).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIRST_SPANS_MS = 1000.0
NAVIGABLE_MS = 5000.0
FRAME_P95_MS = 16.0
RSS_MB = 600.0
CHILD_TIMEOUT_S = 900.0
LIVE_SPANS = 7
"""Live spans added (and finished) for the live figures: their medians are reported."""
LEVELS = ("whole run", "2 % window", "names", "all expanded")
"""The first three with the run's default rows (deep sub-trees collapsed); the last with every span a row."""
MOVES = ("pan", "zoom")
PG_RATIO = 1.5
"""PostgreSQL's first spans drawn and all navigable within this many times SQLite's (issue 21)."""
WARM_OPENS = 3
"""Warm opens of the run (after showing another): each figure's best is reported."""
PROFILE_ENV = "TIMELINE_BENCH_PROFILE"
"""Set by --profile for the measuring children: the folder for the frames' cProfile stats."""


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


# -- store --------------------------------------------------------------------------------------------
def build(spans: int, path: str) -> dict[str, Any]:
    """Child process: a store with one run of `spans` spans among a few small ones."""
    from agentdesk.store.persistence.database import open_store
    from agentdesk.store.sim.generator import populate_bulk

    store = open_store(path)
    try:
        result = populate_bulk(store, projects=1, runs=20, big_run_spans=spans, detailed_runs=5)
    finally:
        store.close()
    return {"run_id": result.big_run_id, "seconds": result.elapsed_s}


# -- measuring ----------------------------------------------------------------------------------------
def rss_mb() -> float:
    import psutil

    return float(psutil.Process().memory_info().rss / 2**20)


class _Answering:
    """The measured source, answering `span_table` with given rows: a live change as the feed fetches
    it (the store is opened read-only; the fetch of a few rows is the same query either way)."""

    def __init__(self, inner: Any, table: Any) -> None:
        self._inner, self._table = inner, table

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def span_table(self, run_id: str, span_ids: Any = None) -> Any:
        self._inner.span_table(run_id, span_ids)  # the read the feed does (answers nothing: not stored)
        return self._table


class Meter:
    """Everything measured in one process on one run: the panel as the window shows it."""

    def __init__(self, path: str, run_id: str, steps: int, shots: Path | None) -> None:
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QApplication

        from agentdesk.gui.shared.theme import apply_theme
        from agentdesk.gui.timeline.panel import TimelinePanel
        from agentdesk.model.services import Services
        from agentdesk.store.native import NativeSource

        self.app = QApplication.instance() or QApplication([])
        apply_theme(self.app, "light")
        self.source = NativeSource.open(path, read_only=True)
        self.services = Services.create(self.source)
        self.run_id, self.steps, self.shots = run_id, steps, shots
        self.panel = TimelinePanel(self.services)
        self.panel.resize(1600, 1000)
        self.panel.show()
        self.longest_stall = 0.0
        self._last_tick = time.perf_counter()
        self._ticker = QTimer()
        self._ticker.setInterval(10)
        self._ticker.timeout.connect(self._tick)

    def close(self) -> None:
        self.panel.close()
        self.services.close()
        self.source.close()

    def _tick(self) -> None:
        now = time.perf_counter()
        self.longest_stall = max(self.longest_stall, now - self._last_tick)
        self._last_tick = now

    def pump(self, until: Callable[[], bool], limit_s: float = 120.0) -> bool:
        give_up = time.monotonic() + limit_s
        while not until():
            if time.monotonic() > give_up:
                return False
            self.app.processEvents()
            time.sleep(0.002)
        self.app.processEvents()
        return True

    def open_run(self) -> dict[str, Any]:
        """show_run → first spans drawn → the whole run drawn, with the GUI thread's longest stall."""
        panel, item = self.panel, self.panel.item
        self.app.processEvents()
        self._last_tick, self.longest_stall = time.perf_counter(), 0.0
        self._ticker.start()
        started = time.perf_counter()
        panel.show_run(self.run_id)
        self.pump(lambda: item.painted[1] > 0 and item.painted[0] > started)
        first = item.painted[0]

        def whole() -> bool:
            done = panel.feed.complete and item.data is not None and (
                item.data is panel.data or getattr(item.data, "rows", None) is panel.rows)
            return done and item.painted[0] > first and item.painted[1] == len(panel.data or ())

        if not (panel.feed.complete and item.painted[1] == len(panel.data or ())):
            self.pump(whole)
        navigable = item.painted[0]
        self._ticker.stop()
        self._tick()
        return {"first_spans_ms": (first - started) * 1000, "navigable_ms": (navigable - started) * 1000,
                "stall_ms": self.longest_stall * 1000, "spans": len(panel.data or ()),
                "rows": len(panel.rows or ()), "rss_loaded_mb": rss_mb()}

    def reopen(self, other: str) -> dict[str, Any]:
        """The run opened again after showing `other` (a small run): the warm figures, pool and caches in use."""
        self.panel.show_run(other)
        self.pump(lambda: self.panel.feed.complete and self.panel.item.painted[0] > 0)
        return self.open_run()

    def frame(self, step: Callable[[], object]) -> float:
        """One step and everything the event loop then does to repaint: the whole frame, in ms."""
        item = self.panel.item
        before = len(item.paint_ms)
        started = time.perf_counter()
        step()
        self.app.processEvents()
        if len(item.paint_ms) == before:  # nothing scheduled a paint yet: force the one a screen would do
            self.panel.plot.viewport().repaint()
        return (time.perf_counter() - started) * 1000

    def level(self, name: str) -> None:
        panel = self.panel
        panel.expand_all(name == "all expanded")  # the default rows, or one row per span
        self.pump(lambda: True)
        data = panel.shown  # rows: y in the waterfall is a row
        assert data is not None
        panel.fit()
        self.app.processEvents()
        if name == "whole run":
            (x0, x1), (y0, y1) = panel.view.viewRange()
            panel.show_window(x0, x1, y0, y1)
        else:
            x0, x1 = data.extent(panel.item.now)
            middle = len(data) // 2
            if name == "2 % window":
                width, lanes = (x1 - x0) * 0.02, min(len(data), 3000)
            else:
                width, lanes = 20.0 * max(float(data.end[middle] - data.start[middle]), 0.05), 45
            t = float(data.start[middle])
            top = max(0, middle - lanes // 2)
            panel.show_window(t - width / 2, t + width / 2, top, top + lanes)
        self.pump(lambda: True)
        self.frame(lambda: None)

    def moves(self) -> dict[str, list[float]]:
        view, panel = self.panel.view, self.panel
        out: dict[str, list[float]] = {}
        for name in LEVELS:
            self.level(name)
            self.shoot(name)
            (x0, x1), _ = view.viewRange()
            dx = (x1 - x0) * 0.05
            with self.profiled(f"{name}/pan"):
                out[f"{name}/pan"] = [self.frame(lambda i=i, dx=dx: view.translateBy(x=dx * (-1) ** (i // 10), y=1.0))
                                      for i in range(self.steps)]
            self.level(name)
            with self.profiled(f"{name}/zoom"):
                out[f"{name}/zoom"] = [self.frame(lambda i=i: panel.zoom(1.25 if i % 2 else 0.8))
                                       for i in range(self.steps)]
        return out

    @contextlib.contextmanager
    def profiled(self, key: str) -> Iterator[None]:
        """With --profile DIR: cProfile the frames of one move into DIR/<spans>-<level>-<move>.prof
        (profiled frames run slower: their timings are for finding costs, not for the targets)."""
        folder = os.environ.get(PROFILE_ENV)
        if not folder:
            yield
            return
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
        try:
            yield
        finally:
            profile.disable()
            Path(folder).mkdir(parents=True, exist_ok=True)
            name = f"{len(self.panel.data or ())}-{key.replace(' ', '-').replace('/', '-')}.prof"
            profile.dump_stats(str(Path(folder) / name))

    def live_append(self) -> float:
        """The layout part alone of one new span (on the runner): a live run's next span, under the
        root and after everything so far, inserted into the loaded run."""
        from agentdesk.store.readmodel import SpanTable

        data = self.panel.data
        assert data is not None
        new = SpanTable(["spn_bench_new"], [data.ids[0]], ["tool"], ["new"], ["running"],
                        [data.t0 + float(data.start.max()) + 0.1], [None], [0], [0], [0.0])
        started = time.perf_counter()
        data.relaid_out(new)
        return (time.perf_counter() - started) * 1000

    def live(self, spans: int = LIVE_SPANS) -> dict[str, float]:
        """The feed's whole refresh for a live run's new span, then for that span finishing: the
        runner's part (`load_changes`: the fetch of the changed rows, layout, grid, token series and
        rows) and the GUI thread's part (the feed swapping the results in and the panel taking them,
        also reported alone, then the repaint), medians over `spans` spans, wall ms (CPU ms of the
        runner's part beside it)."""
        import inspect

        from agentdesk.model.timeline import feed as feed_module
        from agentdesk.store.readmodel import SpanTable

        feed = self.panel.feed
        out: dict[str, list[float]] = {}
        takes_shown = "shown" in inspect.signature(feed_module.load_changes).parameters  # older trees: no

        def refresh(key: str, table: SpanTable) -> None:
            data = feed.data
            assert data is not None and feed.run_id is not None
            source = _Answering(self.source, table)
            extra = (feed_module.Shown(feed.run, feed.tokens, feed.overview, feed.rows, feed.row_grid),) \
                if takes_shown else ()
            wall, cpu = time.perf_counter(), time.process_time()
            changed = feed_module.load_changes(source, data, feed.run_id, list(table.ids), False,  # type: ignore[arg-type]
                                               dict(feed.overrides), *extra)
            runner, runner_cpu = (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000
            ids = frozenset(table.ids)
            swap: list[float] = []

            def swapped() -> None:  # the feed's swap and the panel taking the results (signals are direct)
                begun = time.perf_counter()
                feed._changed(changed, ids, feed._overrides_version)
                swap.append((time.perf_counter() - begun) * 1000)

            gui = self.frame(swapped)
            for name, value in (("runner", runner), ("runner_cpu", runner_cpu), ("gui", gui), ("swap", swap[0])):
                out.setdefault(f"{key}_{name}_ms", []).append(value)

        for i in range(spans):
            data = feed.data
            assert data is not None
            start = data.t0 + float(data.start.max()) + 0.1
            span_id = f"spn_bench_live_{id(feed)}_{i}_{time.perf_counter_ns()}"  # new on every call
            refresh("new", SpanTable([span_id], [data.ids[0]], ["model"], ["live"], ["running"], [start], [None],
                                     [0], [0], [0.0]))
            assert feed.data is not None and span_id in feed.data.lane_of, "the new span was not laid out"
            refresh("finished", SpanTable([span_id], [data.ids[0]], ["model"], ["live"], ["ok"], [start],
                                          [start + 0.05], [120], [30], [0.001]))
            assert feed.data is not None and not feed.data.open[feed.data.lane_of[span_id]]
        return {key: statistics.median(values) for key, values in out.items()}

    def stages(self) -> dict[str, float]:
        """The store read and the layout of the whole run, timed alone (see the module docstring)."""
        from agentdesk.store.analysis.layout.data import TimelineData
        from agentdesk.store.timeline.read import span_columns

        out: dict[str, float] = {}
        wall, cpu = time.perf_counter(), time.process_time()
        cols = span_columns(self.source, self.run_id)
        out["read_s"], out["read_cpu_s"] = time.perf_counter() - wall, time.process_time() - cpu
        wall, cpu = time.perf_counter(), time.process_time()
        TimelineData.from_columns(cols, float(cols.start.min()) if len(cols) else 0.0)
        out["layout_s"], out["layout_cpu_s"] = time.perf_counter() - wall, time.process_time() - cpu
        return out

    def shoot(self, name: str) -> None:
        if self.shots is not None:
            self.shots.mkdir(parents=True, exist_ok=True)
            self.panel.grab().save(str(self.shots / f"{len(self.panel.data or ())}-{name.replace(' ', '-')}.png"))


def measure(path: str, run_id: str, steps: int, shots: Path | None, open_only: bool = False) -> dict[str, Any]:
    """Child process: open the run in a timeline panel and measure it (see the module docstring)."""
    import gc

    gc.freeze()  # as the app does once its window is built
    meter = Meter(path, run_id, steps, shots)
    try:
        figures = meter.open_run()
        other = _another_run(meter.source, run_id)
        if other is not None:  # the best of WARM_OPENS for each figure: the machine's noise mostly out
            opens = [meter.reopen(other) for _ in range(WARM_OPENS)]
            figures["warm"] = {key: min(o[key] for o in opens) for key in ("first_spans_ms", "navigable_ms")}
        if open_only:
            return figures
        figures["frames"] = meter.moves()
        figures["rss_after_mb"] = rss_mb()
        figures["append_ms"] = meter.live_append()
        figures.update(meter.live())
        figures["load_before_stages"] = os.getloadavg()[0]
        figures.update(meter.stages())
        return figures
    finally:
        meter.close()


def _another_run(source: Any, run_id: str) -> str | None:
    """A small run of the same store (the generator makes 20): shown between the cold and the warm open."""
    from sqlalchemy import text

    with source.store.reading() as session:
        found = session.execute(text("SELECT id FROM runs WHERE id <> :run ORDER BY id LIMIT 1"),
                                {"run": run_id}).scalar()
    return None if found is None else str(found)


# -- the parent: sizes side by side --------------------------------------------------------------------
def child(*args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=CHILD_TIMEOUT_S, env=dict(os.environ))
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]))
    raise RuntimeError(f"{args[0]} child exited with {proc.returncode}: {proc.stderr.strip()[-1500:]}")


def run_size(spans: int, steps: int, shots: Path | None, folder: Path, store: str | None = None,
             open_only: bool = False) -> dict[str, Any]:
    """One size on one store: a SQLite file in `folder` (reused with --keep), or `store` (a database URL)."""
    path = store or str(folder / f"timeline-{spans}.sqlite")
    marker = folder / (f"timeline-{spans}.json" if store is None else f"timeline-{spans}-pg.json")
    if marker.exists() and store is None:  # --keep: a store generated by an earlier run (same generator, same seed)
        built = dict(json.loads(marker.read_text()), seconds=None)
    else:
        built = child("--build", str(spans), path)
        marker.write_text(json.dumps(built))
    figures = child("--measure", path, built["run_id"], str(steps), str(shots or ""), *(["--open-only"] * open_only))
    figures["claimed"], figures["build_s"] = spans, built["seconds"]
    return figures


class PgServer:
    """Fresh databases on a PostgreSQL server for the comparison, dropped at the end."""

    def __init__(self, url: str) -> None:
        from agentdesk.store.persistence.postgres.engine import libpq_url

        self.url, self.libpq, self.made = url, libpq_url(url), list[str]()

    def fresh(self, spans: int) -> str:
        import psycopg

        name = f"agentdesk_timeline_bench_{spans}_{os.getpid()}"
        with psycopg.connect(self.libpq, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        self.made.append(name)
        base, _, query = self.url.partition("?")
        return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")

    def close(self) -> None:
        import psycopg

        with psycopg.connect(self.libpq, autocommit=True) as conn:
            for name in self.made:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def compare(lite: dict[str, Any], pg: dict[str, Any]) -> list[str]:
    """PostgreSQL's opens beside SQLite's, printed; a ratio past `PG_RATIO` (or a different run) is missed."""
    n = f"{lite['claimed']:,}"
    out = []
    print(f"\n{n} spans: PostgreSQL beside SQLite (the panel drawing them)")
    print(f"{'':34s}{'SQLite':>12s}{'PostgreSQL':>12s}{'ratio':>9s}   target")
    if pg["spans"] != lite["spans"] or pg.get("rows") != lite.get("rows"):
        out.append(f"{n}: PostgreSQL shows {pg['spans']:,} spans in {pg['rows']:,} rows, SQLite "
                   f"{lite['spans']:,} in {lite['rows']:,}")
    for when, a, b in (("first open", lite, pg), ("warm open", lite.get("warm"), pg.get("warm"))):
        if a is None or b is None:
            continue
        for key, label in (("first_spans_ms", "first spans drawn"), ("navigable_ms", "all navigable")):
            ratio = b[key] / a[key] if a[key] > 0 else float("inf")
            print(f"{when + ': ' + label:34s}{a[key]:>9.0f} ms{b[key]:>9.0f} ms{ratio:>8.2f}x   <= {PG_RATIO}x")
            if ratio > PG_RATIO:
                out.append(f"{n}: PostgreSQL's {label} ({when}) {ratio:.2f}x SQLite's "
                           f"({b[key]:.0f} ms against {a[key]:.0f} ms)")
    return out


def missed(figures: dict[str, Any]) -> list[str]:
    """Every target this size missed, by name."""
    n = f"{figures['claimed']:,}"
    out = []
    if figures["spans"] != figures["claimed"]:
        out.append(f"{n}: the run has {figures['spans']:,} spans, not {n}")
    if figures["first_spans_ms"] >= FIRST_SPANS_MS:
        out.append(f"{n}: first spans {figures['first_spans_ms'] / 1000:.2f} s")
    if figures["navigable_ms"] > NAVIGABLE_MS:
        out.append(f"{n}: navigable {figures['navigable_ms'] / 1000:.2f} s")
    for key, values in figures.get("frames", {}).items():
        if p95(values) > FRAME_P95_MS:
            out.append(f"{n}: {key} p95 {p95(values):.1f} ms")
    worst = max(figures["rss_loaded_mb"], figures.get("rss_after_mb", 0.0))
    if worst > RSS_MB:
        out.append(f"{n}: RSS {worst:.0f} MB")
    return out


def report(results: list[dict[str, Any]]) -> list[str]:
    def row(label: str, cell: Callable[[dict[str, Any]], str], target: str = "") -> None:
        print(f"{label:34s}" + "".join(f"{cell(r):>18s}" for r in results) + f"   {target}")

    row("backend", lambda r: str(r.get("backend", "SQLite")))
    row("spans in the run (claimed)", lambda r: f"{r['spans']:,} ({r['claimed']:,})", "must match")
    row("store generated (bulk insert)", lambda r: "n/a" if r["build_s"] is None else f"{r['build_s']:.1f} s")
    row("rows shown on opening", lambda r: f"{r['rows']:,}", "sub-trees collapsed by default")
    row("first spans drawn", lambda r: f"{r['first_spans_ms']:.0f} ms", f"< {FIRST_SPANS_MS:.0f} ms")
    row("all navigable", lambda r: f"{r['navigable_ms']:.0f} ms", f"<= {NAVIGABLE_MS:.0f} ms")
    row("  per span", lambda r: f"{r['navigable_ms'] * 1000 / max(r['spans'], 1):.2f} µs", "linear: flat")
    row("longest GUI stall while loading", lambda r: f"{r['stall_ms']:.0f} ms", "info")
    if "frames" not in results[0]:  # --open-only
        return [m for r in results for m in missed(r)]
    for key in results[0]["frames"]:
        row(f"{key} p50 / p95", lambda r, key=key: f"{statistics.median(r['frames'][key]):.1f} / "
            f"{p95(r['frames'][key]):.1f} ms", f"p95 <= {FRAME_P95_MS:.0f} ms (whole frame)")
    row("RSS run shown / after steps", lambda r: f"{r['rss_loaded_mb']:.0f} / {r['rss_after_mb']:.0f} MB",
        f"<= {RSS_MB:.0f} MB")
    row("store read alone (wall / CPU)", lambda r: f"{r['read_s']:.2f} / {r['read_cpu_s']:.2f} s", "info")
    row("layout alone (wall / CPU)", lambda r: f"{r['layout_s']:.2f} / {r['layout_cpu_s']:.2f} s", "info")
    row("load average at those", lambda r: f"{r['load_before_stages']:.2f}", "info")
    row("live: new span, layout alone", lambda r: f"{r['append_ms']:.1f} ms", "info (off the GUI thread)")
    for key, label in (("new", "live: new span, whole refresh"), ("finished", "live: span finished, refresh")):
        def whole(r: dict[str, Any], key: str = key) -> str:
            return f"{r[f'{key}_runner_ms'] + r[f'{key}_gui_ms']:.1f} ms"

        def runner(r: dict[str, Any], key: str = key) -> str:
            return f"{r[f'{key}_runner_ms']:.1f} / {r[f'{key}_runner_cpu_ms']:.1f} ms"

        def gui(r: dict[str, Any], key: str = key) -> str:
            return f"{r[f'{key}_gui_ms']:.1f} ms ({r[f'{key}_swap_ms']:.1f} before the repaint)"

        row(label, whole, "info (runner + GUI)")
        row("  runner (wall / CPU)", runner, "info (off the GUI thread)")
        row("  GUI thread (swap+panel, paint)", gui, "info (a few ms)")
    return [m for r in results for m in missed(r)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", default="100000,300000,1000000", help="comma-separated run sizes")
    parser.add_argument("--steps", type=int, default=40, help="frames per move and zoom level")
    parser.add_argument("--shots", type=Path, default=None, help="save screenshots here")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the generated stores in this folder and reuse them on the next run")
    parser.add_argument("--profile", type=Path, default=None,
                        help="cProfile each move's frames into this folder (slows those frames: not for the targets)")
    parser.add_argument("--postgres", default=None, metavar="URL",
                        help="also measure the same run on this PostgreSQL server (auto: $AGENTDESK_TEST_PG) and "
                             f"compare: first spans and all navigable within {PG_RATIO}x SQLite's")
    parser.add_argument("--open-only", action="store_true",
                        help="measure only opening the run (no moves, live, stages)")
    parser.add_argument("--build", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--measure", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        print("RESULT " + json.dumps(build(int(args.build[0]), args.build[1])))
        return 0
    if args.measure:
        path, run_id, steps, shots = args.measure
        print("RESULT " + json.dumps(measure(path, run_id, int(steps), Path(shots) if shots else None,
                                             args.open_only)))
        return 0
    if args.profile is not None:
        os.environ[PROFILE_ENV] = str(args.profile.resolve())
    pg_url = os.environ.get("AGENTDESK_TEST_PG", "") if args.postgres == "auto" else args.postgres
    if args.postgres is not None and not pg_url:
        print("--postgres auto needs $AGENTDESK_TEST_PG (a PostgreSQL server's URL)", file=sys.stderr)
        return 2
    sizes = [int(s.replace("_", "")) for s in args.spans.split(",")]
    print(f"timeline bench: {', '.join(f'{s:,}' for s in sizes)} spans; load {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores" + (" ; SQLite and PostgreSQL" if pg_url else ""))
    results, compared = [], []
    server = PgServer(pg_url) if pg_url else None
    try:
        with tempfile.TemporaryDirectory(prefix="timeline-bench-") as scratch:
            folder = args.keep or Path(scratch)
            folder.mkdir(parents=True, exist_ok=True)
            for spans in sizes:
                lite = run_size(spans, args.steps, args.shots, folder, open_only=args.open_only)
                results.append(lite)
                if server is not None:
                    pg = run_size(spans, args.steps, None, folder, server.fresh(spans), args.open_only)
                    pg["backend"] = "PostgreSQL"
                    results.append(pg)
                    compared.append((lite, pg))
    finally:
        if server is not None:
            server.close()
    failures = report(results)
    for lite, pg in compared:
        failures += compare(lite, pg)
    print(f"load after: {os.getloadavg()[0]:.2f}")
    if args.profile is not None:
        print(f"frames were cProfiled into {args.profile} (so they ran slower than the figures a plain run gives)")
    print("all targets met" if not failures else f"MISSED: {'; '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
