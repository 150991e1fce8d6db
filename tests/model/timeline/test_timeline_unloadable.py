"""`gui --screenshot --view timeline` of a run that cannot be loaded exits 5 with one sentence and saves
nothing (issue 21: it used to exit 0 with an empty picture), even when the failure has no message."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentdesk.cli.main import main
from agentdesk.model.timeline import feed
from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime


def _broken(*_args: object, **_kwargs: object) -> object:
    raise AssertionError  # what the SQLite-only read raised on PostgreSQL: no message at all


def test_an_unloadable_run_is_a_failed_screenshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    path = tmp_path / "s.sqlite"
    source = NativeSource.open(str(path))
    rt = AgentRuntime(source.store)
    run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"),
                                       "a", "m"), "r")
    rt.start_span(run, "agent", "root")
    source.close()
    monkeypatch.setattr(feed, "span_columns", _broken)
    shot = tmp_path / "timeline.png"
    code = main(["--store", str(path), "gui", "--screenshot", str(shot), "--view", "timeline", "--select", run])
    err = capsys.readouterr().err.strip()
    assert code == 5 and not shot.exists()
    assert err.count("\n") == 0 and f"Could not load the run {run}: AssertionError." in err
