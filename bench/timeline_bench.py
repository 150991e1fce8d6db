"""Timeline benchmark: load and lay out a 100,000-span run, paint it, then zoom and pan it.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/timeline_bench.py [--spans N] [--shots DIR]

Prints the store read, the layout, the first paint and, per zoom/pan frame, the
span item's own paint time and the whole frame: the step itself (pyqtgraph's
range bookkeeping and the linked views, which run at once) plus everything the
event loop then does to repaint both plots (median and p95, target < 16 ms).
The store is built in a temporary directory with `store.sim.generator.populate_bulk`
(bulk Core inserts).
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

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtWidgets import QApplication

from agentdesk.model.services import Services
from agentdesk.model.timeline.data import TimelineData
from agentdesk.store.native import NativeSource
from agentdesk.store.sim.generator import populate_bulk
from agentdesk.store.source import SpanTable


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    started = time.perf_counter()
    result = fn()
    return result, (time.perf_counter() - started) * 1000


def stats(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered):6.2f} ms   p95 {p95:6.2f} ms   max {ordered[-1]:6.2f} ms"


def build_store(spans: int, folder: Path) -> tuple[NativeSource, str]:
    source = NativeSource.open(str(folder / "bench.sqlite"))
    result, ms = timed(lambda: populate_bulk(source.store, projects=1, runs=20, big_run_spans=spans,
                                             detailed_runs=5))
    print(f"store built: {result.counts['spans']:,} spans in {ms / 1000:.1f} s")  # type: ignore[attr-defined]
    return source, result.big_run_id  # type: ignore[attr-defined]


def measure_layout(source: NativeSource, run_id: str) -> None:
    run = source.run(run_id)
    table, read_ms = timed(lambda: source.span_table(run_id))
    t0 = run.started_at.timestamp()
    layouts = [timed(lambda: TimelineData.from_table(table, t0))[1] for _ in range(3)]  # type: ignore[arg-type]
    data = TimelineData.from_table(table, t0)  # type: ignore[arg-type]
    _, tokens_ms = timed(data.token_series)
    print(f"store read (span_table): {read_ms:7.1f} ms for {len(data):,} spans")
    print(f"layout (DFS, depths):    {layouts[0]:7.1f} ms first, {min(layouts):.1f} ms best of 3")
    print(f"tokens series:           {tokens_ms:7.1f} ms")
    measure_live_updates(source, run_id, data)


def measure_live_updates(source: NativeSource, run_id: str, data: TimelineData) -> None:
    """What a live change costs: fetch the changed rows, then update in place or lay out again."""
    some = data.ids[len(data) // 2:len(data) // 2 + 5]
    rows, fetch_ms = timed(lambda: source.span_table(run_id, some))
    _, in_place_ms = timed(lambda: data.update(rows))  # type: ignore[arg-type]
    parent = data.ids[len(data) // 2]
    new = SpanTable(["spn_bench_new"], [parent], ["tool"], ["new"], ["running"],
                    [data.t0 + float(data.start[len(data) // 2]) + 0.1], [None], [0], [0], [0.0])
    _, relayout_ms = timed(lambda: data.relaid_out(new))
    print(f"live: fetch 5 changed rows {fetch_ms:.1f} ms; apply in place {in_place_ms:.2f} ms; "
          f"a new span (full re-layout, off the GUI thread) {relayout_ms:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--shots", type=Path, default=None, help="save screenshots here")
    args = parser.parse_args()
    app = QApplication([])
    with tempfile.TemporaryDirectory() as folder:
        source, run_id = build_store(args.spans, Path(folder))
        measure_layout(source, run_id)
        services = Services.create(source)
        try:
            GuiBench(app, services, run_id, args.steps, args.shots).run()
        finally:
            services.close()
            source.close()


class GuiBench:
    def __init__(self, app: QApplication, services: Services, run_id: str, steps: int,
                 shots: Path | None) -> None:
        from agentdesk.gui.shared.theme import apply_theme
        from agentdesk.gui.timeline.panel import TimelinePanel

        self.app, self.run_id, self.steps, self.shots = app, run_id, steps, shots
        apply_theme(app, "light")
        self.apply_theme = apply_theme
        self.panel = TimelinePanel(services)
        self.panel.resize(1600, 1000)
        self.panel.show()

    def settle(self, until: Callable[[], bool] = lambda: True, limit_s: float = 60.0) -> None:
        give_up = time.monotonic() + limit_s
        while not until() and time.monotonic() < give_up:
            self.app.processEvents()
            time.sleep(0.005)
        self.app.processEvents()

    def frame(self, started: float | None = None) -> tuple[float, float]:
        """Let Qt paint what the last step changed: the span item's own paint time and the whole frame's.

        The whole frame runs from `started` (the step's start) to the end of
        everything the event loop did for it: the waterfall with its axes and
        the x-linked tokens plot.
        """
        paints = self.panel.item.paint_ms
        before = len(paints)
        started = time.perf_counter() if started is None else started
        self.app.processEvents()
        if len(paints) == before:
            self.panel.plot.viewport().repaint()
        wall = (time.perf_counter() - started) * 1000
        return sum(list(paints)[before:]), wall

    def load(self) -> None:
        self.panel.show_run(self.run_id)
        self.settle(lambda: self.panel.data is not None)

    def run(self) -> None:
        panel = self.panel
        _, load_ms = timed(self.load)
        print(f"show_run to data on screen: {load_ms:7.1f} ms (store read + layout on the runner)")
        self.app.processEvents()
        panel.plot.viewport().repaint()
        item_ms, wall_ms = panel.item.paint_ms[-1], timed(lambda: panel.plot.viewport().repaint())[1]
        print(f"first paint (fit, all lanes): item {item_ms:6.2f} ms, whole frame {wall_ms:6.2f} ms")
        self.shoot("big-zoomed-out")
        self.steps_of("zoom in from fit (LOD)", lambda i: panel.zoom(0.85))
        panel.show_window(0, 600, 0, 45)
        self.settle()
        self.frame()
        self.shoot("big-zoomed-in")
        self.steps_of("pan, zoomed in (names)", lambda i: panel.view.translateBy(x=15.0, y=1.0))
        panel.fit()
        panel.show_window(*panel.view.viewRange()[0], *panel.view.viewRange()[1])  # stop following
        self.settle()
        self.frame()
        self.steps_of("pan, zoomed out (LOD)", lambda i: panel.view.translateBy(x=2000.0 * (-1) ** (i // 10)))
        self.steps_of("wheel-like zoom out/in", lambda i: panel.zoom(1.25 if i % 2 else 0.8))

    def steps_of(self, label: str, step: Callable[[int], object]) -> None:
        items, walls = [], []
        for i in range(self.steps):
            started = time.perf_counter()
            step(i)
            item_ms, wall_ms = self.frame(started)
            items.append(item_ms)
            walls.append(wall_ms)
        print(f"{label:26s} item: {stats(items)}   |   whole frame: {stats(walls)}")

    def shoot(self, name: str) -> None:
        if self.shots is None:
            return
        self.shots.mkdir(parents=True, exist_ok=True)
        for theme in ("light", "dark"):
            self.apply_theme(self.app, theme)
            self.settle()
            self.panel.grab().save(str(self.shots / f"{name}-{theme}.png"))
        self.apply_theme(self.app, "light")
        self.settle()


if __name__ == "__main__":
    main()
