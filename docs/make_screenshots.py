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

from sqlalchemy import text  # noqa: E402

from agentdesk.store.native import NativeSource  # noqa: E402
from agentdesk.store.notes import commands as notes  # noqa: E402
from agentdesk.store.persistence.database import Store, open_store  # noqa: E402
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
    mark_some(store)
    store.close()
    return agent_id


def mark_some(store: Store) -> None:
    """The night shift's notes and labels: what the Shift notes screenshot lists and the timeline flags."""
    with store.reading() as s:
        spans = [row[0] for row in s.execute(text(
            "SELECT id FROM spans WHERE kind = 'tool' ORDER BY started_at LIMIT 3")).all()]
        runs = [row[0] for row in s.execute(text("SELECT id FROM runs ORDER BY started_at LIMIT 2")).all()]
    if len(spans) < 3 or len(runs) < 2:
        return
    notes.add_note(store, "span", spans[0], "Read the whole log with cat instead of grep: slow and costly.",
                   "alice")
    notes.add_label(store, "span", spans[0], "bad-tool-choice", "alice")
    notes.add_label(store, "span", spans[1], "needs-review", "bob")
    notes.add_note(store, "span", spans[1], "Check this shell call before the deploy tomorrow.", "bob")
    notes.add_label(store, "run", runs[0], "regression", "alice")
    notes.add_note(store, "run", runs[1], "Flaky since the model update; compare with yesterday's run.", "carol")
    notes.add_label(store, "span", spans[2], "needs-review", "carol")


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


def message_some(path: Path) -> str:
    """An agent an operator messaged: one message delivered at its model call (shown with its author), one still
    pending (shown last, with Cancel). The simulated sessions have finished by now, and a finished agent takes no
    messages, so this is an agent of its own."""
    from agentdesk.store.messages import commands as messages
    from agentdesk.store.runtime import AgentRuntime

    store = open_store(str(path))
    try:
        rt = AgentRuntime(store, actor="triage-bot")
        project = rt.create_project("checkout-service")
        agent = rt.create_agent(rt.create_session(rt.create_task(project, "Flaky checkout test"), "On call"),
                                "triage", "gpt-4.1")
        run = rt.start_run(agent, "Find why checkout fails 1 in 5")
        turn = rt.new_turn_group(agent, "turn")
        rt.append_context(agent, turn, "message", "system", "You are the on-call triage agent.")
        rt.append_context(agent, turn, "message", "user", "The checkout test fails about 1 in 5 runs on CI.")
        rt.append_context(agent, turn, "message", "assistant", "I will rerun it with verbose logging first.")
        messages.send(store, agent, "Skip the rerun: the CI logs from last night already show the timeout.",
                      "alice")
        messages.take(store, agent, "triage-bot")
        model = rt.start_span(run, "model", "gpt-4.1 chat", context_of_agent=agent)
        rt.finish_span(model, "ok", "Reading last night's CI logs.", input_tokens=900, output_tokens=60)
        messages.send(store, agent, "When you find it, propose the fix but do not push it.", "bob")
        return agent
    finally:
        store.close()


SIZES = ((1024, 768), (1366, 768), (1920, 1080), (2560, 1440))
"""The window at the screens people have: each size in light and dark (window-WxH-THEME.png)."""


def shoot(store: Path, out: Path, view: str, theme: str = "light", select: str | None = None,
          size: tuple[int, int] = (1920, 1080), *, allow_writes: bool = False) -> None:
    writes = ["--allow-writes"] if allow_writes else []
    args = [sys.executable, "-m", "agentdesk.cli", "--store", str(store), *writes, "gui", "--screenshot", str(out),
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


def ask_something(store: Path) -> str:
    """A pending question with options in the showcase run, as an agent asks it (`run.ask`), for asks.png."""
    from agentdesk.store.asks import commands as asks

    opened = open_store(str(store))
    try:
        source = NativeSource(opened)
        run_id = source.showcase_run()
        assert run_id is not None
        asks.create(opened, run_id, "The nightly export failed twice on the same 3 rows. Shall I skip them and "
                    "finish the export, or stop here so someone can look?", ["Skip the 3 rows and finish",
                                                                            "Stop and wait for me"],
                    expires_in=1800, actor="planner")
        return asks.create(opened, run_id, "Which customer region should the refund report cover?",
                           ["EU", "US", "APAC"], expires_in=3600, actor="planner")
    finally:
        opened.close()


def error_span(store: Path) -> str | None:
    import sqlite3

    with sqlite3.connect(store) as conn:
        row = conn.execute("SELECT s.id FROM spans s WHERE s.status = 'error' AND s.kind IN ('model', 'tool') "
                           "ORDER BY (SELECT count(*) FROM spans t WHERE t.run_id = s.run_id) DESC").fetchone()
    return row[0] if row else None


def marked_span(store: Path) -> str | None:
    """A span the night shift noted: its flag, its notes and labels in the details pane."""
    import sqlite3

    with sqlite3.connect(store) as conn:
        row = conn.execute("SELECT target_id FROM notes WHERE target_kind = 'span' ORDER BY created_at").fetchone()
    return None if row is None else str(row[0])


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


def writes_confirmed(path: Path) -> None:
    """The per-database write consent, as if the operator had said yes (the screenshot run never asks)."""
    from agentdesk.gui.window.write_consent import confirm_writes
    from agentdesk.store.sources import open_source

    source = open_source(str(path))
    try:
        confirm_writes(source.descriptor)
    finally:
        source.close()


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
    question = ask_something(store)
    shoot(store, out / "asks.png", "approvals", "light", question, (1366, 768))
    shoot(store, out / "context.png", "context", "light", compacted_agent)
    shoot(store, out / "messages.png", "context", "light", message_some(store), (1366, 768))
    for width, height in ((1366, 768), (1920, 1080)):
        shoot(store, out / f"shift-notes-{width}x{height}.png", "notes", "light", marked_span(store),
              (width, height))
    held = work / "held.sqlite"
    paused = held_runs(held)
    for width, height in ((1366, 768), (1920, 1080)):
        shoot(held, out / f"run-controls-{width}x{height}.png", "window", "light", paused, (width, height))
    for kind in ("lensagent", "stageflow", "vgxness", "maka"):
        fixture = work / f"{kind}.sqlite"
        subprocess.run([sys.executable, "-m", f"tests.store.sources.fixtures_{kind}", str(fixture)], check=True,
                       cwd=ROOT, stdout=subprocess.DEVNULL)
        shoot(fixture, out / f"{kind}.png", "window", "light")
        if kind == "lensagent":  # issue 24: Stop… enabled on a lensagent run, Pause / Resume off with the reason
            writes_confirmed(fixture)
            shoot(fixture, out / "lensagent-stop-1366x768.png", "window", "light", "run_1", (1366, 768),
                  allow_writes=True)


if __name__ == "__main__":
    main()
