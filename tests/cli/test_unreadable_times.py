"""Out-of-range times in agentdesk's own store (±1e300, 9.2e18, NaN's neighbours, a word) are read as
"unreadable time", as the foreign readers already do: no command that reads them stops on an error.

The values are written past the runtime, with plain SQL, the way a damaged or hand-edited store holds
them; each command runs in this process through `main()`.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from agentdesk.cli.main import main
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.text.times import UNREADABLE_TIME_TEXT, is_unreadable
from agentdesk.store.timeline.read import span_columns
from tests.conftest import World

BAD_TIMES = (1e300, -1e300, 9.2e18, "soon", -9.2e18)


@pytest.fixture
def damaged(store: Store, store_path: Path, rt: AgentRuntime, world: World) -> tuple[Path, str, str]:
    """Two runs; the first's spans and the second run's start hold impossible times."""
    spans = []
    for n in range(8):
        span = rt.start_span(world.run, "tool", f"step {n}")
        rt.finish_span(span)
        spans.append(span)
    other = rt.start_run(world.agent, "Again")
    rt.finish_span(rt.start_span(other, "tool", "step 0"))
    store.close()
    conn = sqlite3.connect(store_path)
    for n, bad in enumerate(BAD_TIMES):
        conn.execute("UPDATE spans SET started_at = ? WHERE id = ?", (bad, spans[n]))
        conn.execute("UPDATE spans SET ended_at = ? WHERE id = ?", (bad, spans[-1 - n]))
    conn.execute("UPDATE runs SET started_at = ?, ended_at = ? WHERE id = ?", (-1e300, 9.2e18, other))
    conn.execute("UPDATE approvals SET created_at = ?", ("yesterday",))
    conn.execute("UPDATE change_log SET at = ? WHERE seq = (SELECT min(seq) FROM change_log)", (1e300,))
    conn.commit()
    conn.close()
    return store_path, world.run, other


@pytest.mark.sqlite_only
def test_every_reading_command_shows_unreadable_times(damaged: tuple[Path, str, str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path, run, other = damaged
    store = ("--store", str(path))
    commands = [
        ("critical-path", run), ("critical-path", run, "--json"), ("critical-path", other),
        ("export", run), ("export", other), ("export", "--format", "otlp-jsonl", run),
        ("diff", run, other), ("diff", run, other, "--json"),
        ("search", "step"), ("search", "step", "--run", run), ("search", "kind:tool", "--run", run, "--json"),
        ("approvals", "--status", "all"), ("approvals", "--status", "all", "--json"), ("info",),
        ("watch", "--since", "0", "--timeout", "0.1"), ("watch", "--since", "0", "--timeout", "0.1", "--json"),
    ]
    failed = []
    for argv in commands:
        code = main([*store, *argv])
        said = capsys.readouterr()
        if code != 0 or said.err:
            failed.append((argv, code, said.err))
        if argv[0] == "export" and "jsonl" not in argv:
            json.loads(said.out)  # still a document
    assert not failed, failed
    main([*store, "approvals", "--status", "all"])
    assert UNREADABLE_TIME_TEXT in capsys.readouterr().out


@pytest.mark.sqlite_only
def test_the_timeline_columns_and_the_read_model_clamp(damaged: tuple[Path, str, str]) -> None:
    path, run, other = damaged
    source = NativeSource.open(str(path), read_only=True)
    try:
        columns = span_columns(source, run)
        assert np.isfinite(columns.start).all()
        ends = columns.end[~np.isnan(columns.end)]
        assert (np.abs(ends) < 1e12).all() and (np.abs(columns.start) < 1e12).all()
        assert is_unreadable(source.run(other).started_at)
        table = source.span_table(run)
        assert all(abs(s) < 1e12 for s in table.starts)
        assert all(e is None or abs(e) < 1e12 for e in table.ends)
    finally:
        source.close()
