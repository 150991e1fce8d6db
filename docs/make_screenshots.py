"""Re-create the README's screenshots: a simulated store, then `agentdesk gui --screenshot` per view.

    .venv/bin/python docs/make_screenshots.py [OUT_DIR]

The store is played by the simulator for ~40 s; while it runs, an "operator"
approves, denies and edits a few approvals; afterwards it compacts part of one
agent's context, so every view has something to show. The seed runtimes'
fixture databases are rendered too. Everything is offscreen.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentdesk.store.native import NativeSource  # noqa: E402
from agentdesk.store.persistence.database import open_store  # noqa: E402
from agentdesk.store.sim.player import Simulator  # noqa: E402


def play(path: Path) -> str:
    store = open_store(str(path))
    sim = Simulator(store, agents=6, seed=11, speed=4, duration_s=40, approval_timeout_s=1800).start()
    source = NativeSource(store)
    decided = 0
    while sim.running:
        time.sleep(2)
        for approval in source.approvals("pending")[:1]:
            if decided % 3 == 0:
                source.decide(approval.id, True, "alice", "looks safe")
            elif decided % 3 == 1:
                source.decide(approval.id, False, "bob", "not on production data")
            decided += 1
            if decided > 5:
                break
    sim.wait()
    agent_id = compact_some(source)
    store.close()
    return agent_id


def compact_some(source: NativeSource) -> str:
    """An operator's edit: fold the first three visible items of the busiest agent into a summary."""
    agents = [a for p in source.projects() for t in source.tasks(p.id) for s in source.sessions(t.id)
              for a in source.agents(s.id)]
    busiest = max(agents, key=lambda a: len(source.context(a.id).items))
    ctx = source.context(busiest.id)
    first = [i.id for i in ctx.items if i.effective_visible and not i.locked][:3]
    source.compact(busiest.id, first, "The user asked for a triage of the crash; the planner read the logs "
                   "and found the failing query.", "triage", ctx.context_revision, "alice")
    return busiest.id


SIZES = ((1024, 768), (1366, 768), (1920, 1080), (2560, 1440))
"""The window at the screens people have: each size in light and dark (window-WxH-THEME.png)."""


def shoot(store: Path, out: Path, view: str, theme: str = "light", select: str | None = None,
          size: tuple[int, int] = (1920, 1080)) -> None:
    args = [sys.executable, "-m", "agentdesk.cli", "--store", str(store), "gui", "--screenshot", str(out),
            "--view", view, "--theme", theme, "--size", f"{size[0]}x{size[1]}"]
    if select:
        args += ["--select", select]
    subprocess.run(args, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    print(out)


def pending_approval(store: Path) -> str | None:
    """The pending approval with the longest arguments: what the queue must show unclipped."""
    import sqlite3

    with sqlite3.connect(store) as conn:
        row = conn.execute("SELECT id FROM approvals WHERE status = 'pending' ORDER BY length(arguments) DESC"
                           ).fetchone()
    return row[0] if row else None


def error_span(store: Path) -> str | None:
    import sqlite3

    with sqlite3.connect(store) as conn:
        row = conn.execute("SELECT s.id FROM spans s WHERE s.status = 'error' AND s.kind IN ('model', 'tool') "
                           "ORDER BY (SELECT count(*) FROM spans t WHERE t.run_id = s.run_id) DESC").fetchone()
    return row[0] if row else None


def held_runs(path: Path) -> str:
    """Issue 24's run controls: an agent blocked at a checkpoint by alice's pause, another run being stopped.
    Returns the paused run (selected, so the toolbar shows its state)."""
    from agentdesk.store.control import commands as control
    from agentdesk.store.control.checkpoint import reach_checkpoint
    from agentdesk.store.runtime import AgentRuntime

    store = open_store(str(path))
    rt = AgentRuntime(store, actor="migrator")
    session = rt.create_session(rt.create_task(rt.create_project("billing"), "Migrate the invoices table"),
                                "night shift")
    agent = rt.create_agent(session, "migrator", "gpt-4.1")
    for title in ("Back up the invoices table", "Copy rows to invoices_v2"):
        done = rt.start_run(agent, title)
        rt.finish_span(rt.start_span(done, "tool", "pg_dump"), "ok")
        rt.set_run_status(done, "done")
    paused = rt.start_run(agent, "Drop the old invoices table")
    rt.finish_span(rt.start_span(paused, "model", "plan the drop"), "ok")
    control.pause(store, paused, "alice", "waiting for the backup check")
    reach_checkpoint(store, paused, "migrator")
    helper = rt.create_agent(session, "verifier", "gpt-4.1-mini")
    stopping = rt.start_run(helper, "Re-run every invoice total")
    rt.start_span(stopping, "tool", "sum invoices")
    control.stop(store, stopping, "bob", "too slow on production")
    store.close()
    return paused


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["AGENTDESK_CONFIG_DIR"] = tempfile.mkdtemp()
    work = Path(tempfile.mkdtemp())
    store = work / "agentdesk.sqlite"
    compacted_agent = play(store)
    span = error_span(store)
    approval = pending_approval(store)
    shoot(store, out / "window-light.png", "window", "light", span)
    shoot(store, out / "window-dark.png", "window", "dark", span)
    for width, height in SIZES:
        for theme in ("light", "dark"):
            shoot(store, out / f"window-{width}x{height}-{theme}.png", "window", theme, approval or span,
                  (width, height))
    for view in ("tree", "timeline"):
        shoot(store, out / f"{view}.png", view, "light", span)
    shoot(store, out / "approvals.png", "approvals", "light", approval or span, (1366, 768))
    shoot(store, out / "rules.png", "rules", "light", approval or span, (1366, 768))
    shoot(store, out / "context.png", "context", "light", compacted_agent)
    held = work / "held.sqlite"
    paused = held_runs(held)
    for width, height in ((1366, 768), (1920, 1080)):
        shoot(held, out / f"run-controls-{width}x{height}.png", "window", "light", paused, (width, height))
    for kind in ("lensagent", "stageflow", "vgxness", "maka"):
        fixture = work / f"{kind}.sqlite"
        subprocess.run([sys.executable, "-m", f"tests.sources.fixtures_{kind}", str(fixture)], check=True,
                       cwd=ROOT, stdout=subprocess.DEVNULL)
        shoot(fixture, out / f"{kind}.png", "window", "light")


if __name__ == "__main__":
    main()
