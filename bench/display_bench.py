"""What showing hostile arguments costs: the display function, the pane, and "Show all".

Run: .venv/bin/python bench/display_bench.py   (offscreen Qt; a temporary store)

1. `visible` throughput on 5 MB of ASCII, CJK and text full of no-break spaces.
2. `inspect` and the capped `render` of the issue's hostile arguments.
3. In the window's approvals pane (offscreen): the time `show_approval` holds the GUI
   thread for each hostile approval (100,000 spaces, 60 x U+2028, 990 levels, a 5 MB
   line), then "Show all" of the 5 MB line: total time and the longest single slice.

Targets: the pane shows any of them in ≤ 150 ms; no "Show all" slice holds the GUI
thread more than 50 ms (the window stays responsive while 5 MB loads).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import update

from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import schema as sc
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.text.arguments import inspect
from agentdesk.store.text.render import render
from agentdesk.store.text.visible import visible

SHOW_TARGET_MS, SLICE_TARGET_MS = 150.0, 50.0
HOSTILE = {
    "100,000 spaces": json.dumps({"c": "ls" + " " * 100_000 + "; rm -rf ~"}),
    "60 x U+2028": json.dumps({"c": "ls" + "\u2028" * 60 + "; rm -rf ~"}, ensure_ascii=False),
    "990 levels": '{"k":' * 990 + '"deep"' + "}" * 990,
    "5 MB line": json.dumps({"blob": "x" * 5_000_000 + "; rm -rf ~"}),
}


def ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def text_figures() -> None:
    for name, text in (("ASCII", "x" * 5_000_000), ("CJK", "中" * 5_000_000), ("NBSP-heavy", "é\u00a0" * 2_500_000)):
        start = time.perf_counter()
        visible(text)
        print(f"visible, 5 MB {name}: {ms(start):.0f} ms")
    for name, text in HOSTILE.items():
        start = time.perf_counter()
        inspect(text)
        inspected = ms(start)
        start = time.perf_counter()
        lines = list(render(text))
        print(f"{name}: inspect {inspected:.1f} ms, capped render {ms(start):.1f} ms ({len(lines)} lines)")


def pane_figures() -> bool:
    from PySide6.QtWidgets import QApplication

    from agentdesk.gui.approvals.queue import ApprovalQueue
    from agentdesk.model.services import Services

    app = QApplication.instance() or QApplication([])
    folder = Path(tempfile.mkdtemp())
    source = NativeSource.open(str(folder / "bench.sqlite"))
    rt = AgentRuntime(source.store)
    run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"),
                                       "a", "m"), "r")
    ids = {name: rt.request_approval(run, "bash", {"k": 1}) for name in HOSTILE}
    with source.store.writing_session() as s, s.begin():
        for name, text in HOSTILE.items():
            s.execute(update(sc.ApprovalRow).where(sc.ApprovalRow.id == ids[name]).values(arguments=text))
    services = Services.create(source, actor="bench")
    queue = ApprovalQueue(services)
    queue.resize(900, 900)
    queue.show()
    while not queue.pending_model.is_loaded:
        app.processEvents()
    ok = True
    for name, approval_id in ids.items():
        approval = queue.pending_model.approval_at(queue.pending_model.row_of(approval_id))
        start = time.perf_counter()
        queue.details.show_approval(approval)
        took = ms(start)
        ok &= took <= SHOW_TARGET_MS
        print(f"pane shows {name}: {took:.1f} ms (target ≤ {SHOW_TARGET_MS:.0f})")
    slices: list[float] = []
    queue.details.show_approval(queue.pending_model.approval_at(queue.pending_model.row_of(ids["5 MB line"])))
    began = time.perf_counter()
    queue.details.show_all()
    while queue.details.loader.running:
        start = time.perf_counter()
        app.processEvents()
        slices.append(ms(start))
    longest = max(slices)
    print("longest turns (ms):", [round(t, 1) for t in sorted(slices)[-4:]])
    ok &= longest <= SLICE_TARGET_MS
    print(f"Show all of the 5 MB line: {ms(began) / 1000:.1f} s in {len(slices)} event-loop turns, longest "
          f"{longest:.1f} ms (target ≤ {SLICE_TARGET_MS:.0f}), "
          f"{queue.arguments.document().blockCount():,} lines")
    queue.close()
    services.close()
    source.close()
    return ok


if __name__ == "__main__":
    text_figures()
    sys.exit(0 if pane_figures() else 1)
