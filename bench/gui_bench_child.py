"""The window process of `bench/gui_bench.py`: `agentdesk gui` with a probe that reports timings.

    gui_bench_child.py MODE CYCLES -- [agentdesk arguments, e.g. --store PATH gui --select RUN_ID]

Runs exactly what the `agentdesk` console script runs (`agentdesk.cli.main` with the
given arguments). The only addition is made before that: the QApplication that
`run_gui` would create (same arguments) is created first so that an
application event filter can spot the main window when it is shown; from then on
the probe watches only the window itself, the timeline's plot viewport and the
tree's viewport. It prints one `BENCH {json}` line per milestone, each with
`time.time()` (the parent compares it with its own clock taken before `Popen`).

MODE
  paint   report the first painted frame of the main window, then quit.
  select  also wait for the timeline to have painted the spans of the run given
          with `--select`, note RSS, then (CYCLES > 0) measure expanding the tree:
          reset the tree to its cold state and expand the busiest project, its
          task, session and the busy agent, CYCLES times; note RSS again; then page
          the agent's runs in the reveal's 2,000-run pages up to its 20,000 limit
          and time one full tree relayout at that size; quit.

A 10 ms timer from the first frame on records the GUI thread's longest stall.
GUI_BENCH_AGENT names the busy agent. GUI_BENCH_WHAT_IF_GC_FREEZE=1 (only with
`gui_bench.py --what-if-gc-freeze`) calls gc.freeze() once the window is built:
an experiment on a proposed change, not the GUI as shipped.
"""

from __future__ import annotations

import time

STARTED = time.time()  # before any import: the interpreter is up

import asyncio  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402


def emit(event: str, **fields: Any) -> None:
    print("BENCH " + json.dumps({"event": event, "t": time.time(), **fields}), flush=True)


def memory() -> dict[str, float]:
    rss = psutil.Process().memory_info().rss
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {"rss_mb": rss / 2**20, "peak_rss_mb": peak_kib / 1024}


emit("started", at=STARTED)
from agentdesk.cli.main import main as cli_main  # noqa: E402, I001  (first, as the console script does)
from agentdesk.store.analysis.layout.rows import spans_in  # noqa: E402  (rows stand for the spans collapsed into them)

from PySide6.QtCore import QEvent, QModelIndex, QObject, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

PAINT, SHOW = QEvent.Type.Paint, QEvent.Type.Show
TIMEOUT_S = 60.0


class StallMeter(QObject):
    """The GUI thread's longest gap between ticks of a 10 ms timer: how long it was blocked."""

    def __init__(self) -> None:
        super().__init__()
        self.longest = 0.0
        self.last = time.perf_counter()
        self.timer = QTimer(self)
        self.timer.setInterval(10)
        self.timer.timeout.connect(self._tick)

    def start(self) -> None:
        self.last, self.longest = time.perf_counter(), 0.0
        self.timer.start()

    def _tick(self) -> None:
        now = time.perf_counter()
        self.longest = max(self.longest, now - self.last)
        self.last = now

    def take(self) -> float:
        """Longest gap in ms since the last take (the timer's own 10 ms included)."""
        self._tick()
        longest, self.longest = self.longest, 0.0
        return longest * 1000


class Probe(QObject):
    """Spots the main window, then reports its first frame and (optionally) the timeline's first spans."""

    def __init__(self, app: QApplication, mode: str, cycles: int) -> None:
        super().__init__()
        self.app, self.mode, self.cycles = app, mode, cycles
        self.window: Any = None
        self.plot_viewport: Any = None
        self.tree_viewport: Any = None
        self.first_frame_seen = False
        self.first_spans_seen = False
        self.spans_painted = False
        self.tree_paint_waiters: list[Callable[[float], None]] = []
        self.stalls = StallMeter()
        self.script: asyncio.Future[None] | None = None
        app.installEventFilter(self)

    # -- event filter ---------------------------------------------------------------------
    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        kind = event.type()
        if self.window is None:
            if kind == SHOW and type(obj).__name__ == "MainWindow":
                self._found(obj)
            return False
        if obj is self.window and kind == PAINT and not self.first_frame_seen:
            # Not the first UpdateRequest: that one comes before the window is exposed and paints nothing.
            self.first_frame_seen = True
            emit("window_paint")
            QTimer.singleShot(0, self._first_frame_done)  # runs once the whole window has painted
        elif obj is self.plot_viewport and kind == PAINT and not self.spans_painted:
            timeline = self.window.timeline
            had_data = timeline.item.data is not None and len(timeline.item.data) > 0
            before = len(timeline.item.paint_ms)
            if had_data and not self.first_spans_seen:
                self.first_spans_seen = True
                QTimer.singleShot(0, lambda: emit("first_spans_painted", spans=spans_in(timeline.item.data)))
            if had_data and timeline.feed.complete:  # the whole run, not the first spans shown meanwhile
                QTimer.singleShot(0, lambda: self._spans_check(before))
        elif obj is self.tree_viewport and kind == PAINT and self.tree_paint_waiters:
            started = time.perf_counter()
            waiters, self.tree_paint_waiters = self.tree_paint_waiters, []
            QTimer.singleShot(0, lambda: [w(started) for w in waiters])
        return False

    def _found(self, window: Any) -> None:
        self.window = window
        self.app.removeEventFilter(self)
        self.plot_viewport = window.timeline.plot.viewport()
        self.tree_viewport = window.tree.view.viewport()
        for watched in (window, self.plot_viewport, self.tree_viewport):
            watched.installEventFilter(self)
        window.tree.run_selected.connect(lambda run_id: emit("run_selected", run=run_id))
        window.timeline.feed.changed.connect(
            lambda first, _ids: emit("timeline_data", spans=len(window.timeline.data or ())) if first else None)
        emit("window_shown")
        if os.environ.get("GUI_BENCH_WHAT_IF_GC_FREEZE"):  # not the shipped GUI: see gui_bench.py --what-if-gc-freeze
            gc.freeze()  # the same as gc.freeze() right after `MainWindow(services)` in gui/app.py `_run`

    def _first_frame_done(self) -> None:
        emit("window_frame_done", **memory())
        if self.mode == "paint":
            self.app.quit()
        else:
            self.stalls.start()

    def _spans_check(self, before: int) -> None:
        timeline = self.window.timeline
        if self.spans_painted or len(timeline.item.paint_ms) <= before:
            return
        self.spans_painted = True
        emit("spans_painted", spans=spans_in(timeline.item.data), item_paint_ms=timeline.item.paint_ms[-1],
             max_stall_ms=self.stalls.take(), **memory())
        self.script = asyncio.ensure_future(self.expansions())

    # -- expanding the tree ---------------------------------------------------------------
    async def expansions(self) -> None:
        try:
            if self.cycles > 0:
                await self._expansions()
        except Exception as exc:  # report, never hang the parent
            emit("error", message=f"{type(exc).__name__}: {exc}")
        finally:
            self.app.quit()

    async def _expansions(self) -> None:
        tree = self.window.tree
        source = self.window.services.source
        agent_id = os.environ["GUI_BENCH_AGENT"]
        where = source.locate("agent", agent_id)
        path = [("project", where.project_id), ("task", where.task_id), ("session", where.session_id)]
        path += [("agent", a) for a in where.agent_ids]
        for cycle in range(self.cycles):
            await self._cold_tree()
            self.stalls.take()
            for entity, entity_id in path:
                figures = await self._expand(entity, entity_id)
                emit("expanded", cycle=cycle, entity=entity, max_stall_ms=self.stalls.take(), **figures)
            if cycle == self.cycles - 1:
                emit("after_expand", runs_shown=tree.model.runs_shown(agent_id)[0], **memory())
                tree.view.collapse(tree.proxy.mapFromSource(tree.model.find("agent", agent_id)))
                await self._painted_after(time.perf_counter())
                figures = await self._expand("agent", agent_id)
                emit("reexpanded", entity="agent", **figures)
                await self._page_runs(agent_id)

    async def _page_runs(self, agent_id: str) -> None:
        """Load the agent's older runs in the pages revealing an old run uses, up to the reveal limit."""
        from agentdesk.gui.tree.view import REVEAL_MAX_RUNS, REVEAL_PAGE

        tree = self.window.tree
        agent = tree.model.find("agent", agent_id)
        pages: list[float] = []
        self.stalls.take()
        while tree.model.runs_shown(agent_id)[0] < REVEAL_MAX_RUNS:
            inserted: asyncio.Future[float] = asyncio.get_running_loop().create_future()

            def rows(parent: QModelIndex, first: int, last: int, inserted: asyncio.Future[float] = inserted) -> None:
                if parent == agent and not inserted.done():
                    inserted.set_result(time.perf_counter())

            tree.model.rowsInserted.connect(rows)
            started = time.perf_counter()
            if not tree.model.fetch_more(agent, REVEAL_PAGE):
                tree.model.rowsInserted.disconnect(rows)
                break
            at = await asyncio.wait_for(inserted, TIMEOUT_S)
            tree.model.rowsInserted.disconnect(rows)
            painted = await self._painted_after(at)
            pages.append((painted - started) * 1000)
        stall = self.stalls.take()
        layouts = []
        for _ in range(3):  # what any row inserted under an expanded row now costs: QTreeView relays out all
            started = time.perf_counter()
            tree.view.doItemsLayout()
            layouts.append((time.perf_counter() - started) * 1000)
        emit("paged", page=REVEAL_PAGE, pages_ms=pages, max_stall_ms=stall, relayout_ms=sorted(layouts)[1],
             runs_shown=tree.model.runs_shown(agent_id)[0], **memory())

    async def _cold_tree(self) -> None:
        """What a fresh window shows: projects loaded, nothing expanded (the model reloads from the store)."""
        tree = self.window.tree
        tree.view.selectionModel().clear()  # or the tree would reveal the selection again after the reset
        tree.view.collapseAll()
        loaded = asyncio.get_running_loop().create_future()

        def top(entity: str, _id: str) -> None:
            if entity == "" and not loaded.done():
                loaded.set_result(None)

        tree.model.children_loaded.connect(top)
        tree.model.reload()
        await asyncio.wait_for(loaded, TIMEOUT_S)
        tree.model.children_loaded.disconnect(top)
        await self._painted_after(time.perf_counter())

    async def _painted_after(self, mark: float) -> float:
        """Wait for a paint of the tree that started after `mark`; returns when it finished."""
        done = asyncio.get_running_loop().create_future()

        def waiter(started: float) -> None:
            if done.done():
                return
            if started >= mark:
                done.set_result(time.perf_counter())
            else:
                self.tree_paint_waiters.append(waiter)

        self.tree_paint_waiters.append(waiter)
        self.tree_viewport.update()  # harmless if a paint is already on its way
        return float(await asyncio.wait_for(done, TIMEOUT_S))

    async def _expand(self, entity: str, entity_id: str) -> dict[str, float]:
        """`view.expand` → rows inserted under it → the tree painted after the insertion."""
        tree = self.window.tree
        index = tree.proxy.mapFromSource(tree.model.find(entity, entity_id))
        if not index.isValid():
            raise RuntimeError(f"{entity} {entity_id} is not in the tree")
        inserted = asyncio.get_running_loop().create_future()
        target = tree.proxy.index(index.row(), 0, index.parent())

        def rows(parent: QModelIndex, first: int, last: int) -> None:
            if parent == target and not inserted.done():
                inserted.set_result((time.perf_counter(), last - first + 1))

        tree.proxy.rowsInserted.connect(rows)
        try:
            started = time.perf_counter()
            tree.view.expand(index)
            expand_call = time.perf_counter()
            loaded_before = tree.proxy.rowCount(index) > 0
            if loaded_before:  # already loaded: only the view's work
                at, count = expand_call, tree.proxy.rowCount(index)
            else:
                at, count = await asyncio.wait_for(inserted, TIMEOUT_S)
            painted = await self._painted_after(at)
        finally:
            tree.proxy.rowsInserted.disconnect(rows)
        return {"rows": count, "expand_call_ms": (expand_call - started) * 1000,
                "inserted_ms": (at - started) * 1000, "painted_ms": (painted - started) * 1000}


def main() -> int:
    mode, cycles = sys.argv[1], int(sys.argv[2])
    argv = sys.argv[sys.argv.index("--") + 1:]
    emit("imported")
    app = QApplication(sys.argv[:1])  # exactly what run_gui would create
    probe = Probe(app, mode, cycles)

    def give_up() -> None:
        emit("error", message="timed out")
        app.quit()

    QTimer.singleShot(int(TIMEOUT_S * 1000), give_up)
    code = cli_main(argv)
    emit("exit", code=code, probe=probe.first_frame_seen)
    return code


if __name__ == "__main__":
    sys.exit(main())
