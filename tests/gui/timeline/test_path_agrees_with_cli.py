"""The window's critical path (P) and `agentdesk critical-path` report the same numbers: the same spans in
the same order, the same self times, the same total and the same summary line, on a simulated run (with
approval gates) and on each seed runtime's run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from agentdesk.cli.main import main
from agentdesk.gui.timeline.panel import TimelinePanel
from agentdesk.model.services import Services
from agentdesk.store.persistence.database import open_store
from agentdesk.store.sim.player import Simulator
from agentdesk.store.sources import open_source
from tests.gui.foreign_helpers import KINDS, Kind

WAIT_MS = 8000


def cli_path(capsys: pytest.CaptureFixture[str], store: Path, run_id: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["--store", str(store), "critical-path", run_id, "--json"]) == 0
    answer: dict[str, Any] = json.loads(capsys.readouterr().out)
    return answer


def window_path(store: Path, run_id: str, qtbot: Any) -> tuple[TimelinePanel, Services]:
    source = open_source(str(store))
    services = Services.create(source, actor="tester")
    panel = TimelinePanel(services)
    qtbot.addWidget(panel)
    panel.resize(1366, 700)
    panel.show()
    panel.show_run(run_id)
    qtbot.waitUntil(lambda: panel.feed.complete and panel.data is not None, timeout=WAIT_MS)
    panel.plot.setFocus()
    qtbot.keyClick(panel.plot, Qt.Key.Key_P)
    qtbot.waitUntil(lambda: panel.critical.path is not None, timeout=WAIT_MS)
    return panel, services


def assert_same(panel: TimelinePanel, cli: dict[str, Any]) -> None:
    path, data = panel.critical.path, panel.data
    assert path is not None and data is not None
    assert cli["summary"] in panel.header.text()
    assert cli["summary"].capitalize() in panel.path_panel.title.text()
    assert path.described.spans == cli["spans"] == len(path)
    assert path.total == pytest.approx(cli["total_s"], abs=1e-6)
    assert [data.ids[lane] for lane in path.lanes.tolist()] == [row["span_id"] for row in cli["path"]]
    assert path.self_time.tolist() == pytest.approx([row["self_s"] for row in cli["path"]], abs=2e-6)
    assert path.share.tolist() == pytest.approx([row["share"] for row in cli["path"]], abs=2e-6)


def simulated_run(path: Path) -> str:
    store = open_store(str(path))
    sim = Simulator(store, agents=2, seed=7, speed=200, duration_s=0.5, approval_rate=1.0,
                    approval_timeout_s=0.05).start()
    assert sim.wait(60)
    store.close()
    source = open_source(str(path))
    try:
        run_id = source.showcase_run()
        assert run_id is not None
        return run_id
    finally:
        source.close()


def test_a_simulated_run_with_gates(tmp_path: Path, qtbot: Any, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "sim.sqlite"
    run_id = simulated_run(store)
    cli = cli_path(capsys, store, run_id)
    panel, services = window_path(store, run_id, qtbot)
    try:
        assert_same(panel, cli)
    finally:
        services.close()
        services.source.close()


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_each_seed_runtimes_run(kind: Kind, tmp_path: Path, qtbot: Any,
                                capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / f"{kind.name}.sqlite"
    kind.build(store)
    cli = cli_path(capsys, store, kind.live_run)
    panel, services = window_path(store, kind.live_run, qtbot)
    try:
        assert_same(panel, cli)
    finally:
        services.close()
        services.source.close()
