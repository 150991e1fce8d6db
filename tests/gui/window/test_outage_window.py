"""A window on a PostgreSQL store whose server stops and comes back: one line in the status bar while it is gone,
then every change committed before and after it, once each."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentdesk.gui.window.main_window import MainWindow
from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.bus import RESET, Change
from agentdesk.store.persistence.database import open_store
from agentdesk.store.persistence.outage import RideOut, server_name
from agentdesk.store.runtime import AgentRuntime
from tests.postgres.own_server import OwnServer, own_server_fixture  # noqa: F401 - the fixture

UNREACHABLE = "unreachable since"


@pytest.fixture(autouse=True)
def own_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(tmp_path / "config"))


@pytest.fixture
def pg_services(own_server: OwnServer, qtbot: object) -> Iterator[Services]:
    source = NativeSource.open(own_server.url)
    source.watch()
    services = Services.create(source, actor="tester", coalesce_ms=10)
    yield services
    services.close()
    source.close()


def test_the_status_bar_says_the_server_is_gone_then_the_window_catches_up(
        own_server: OwnServer, pg_services: Services, qtbot: Any, tmp_path: Path) -> None:
    window = MainWindow(pg_services)
    qtbot.addWidget(window)
    window.resize(1366, 768)
    window.show()
    seen: list[str] = []
    reloads: list[int] = []

    def heard(batch: Sequence[Change]) -> None:
        reloads.extend(len(seen) for c in batch if c.op == RESET)  # after the outage: every view reloads once
        seen.extend(c.id for c in batch if c.entity == "project")

    pg_services.bridge.changes.connect(heard)
    writer = open_store(own_server.url)
    rt = AgentRuntime(writer, ride_out=RideOut(30.0))  # an agent: waits for the server, as the client's does
    try:
        made = [rt.create_project(f"before {n}") for n in range(3)]
        qtbot.waitUntil(lambda: set(made) <= set(seen), timeout=10_000)
        label = window.status.live_label
        own_server.stop()
        try:
            qtbot.waitUntil(lambda: (window.status.refresh(), UNREACHABLE in label.text())[1], timeout=20_000)
            shown = label.text()
            assert shown.startswith(f"○ PostgreSQL at {server_name(own_server.url)} unreachable since ")
            assert shown.endswith(", retrying") and "\n" not in shown
            store_label = window.status.store_label
            for width, height in ((1366, 768), (1920, 1080)):
                window.resize(width, height)
                qtbot.waitUntil(lambda w=width: window.width() == w and label.width() >= label.sizeHint().width()
                                and not label.geometry().intersects(store_label.geometry()))  # read whole
                window.grab().save(str(tmp_path / f"outage-{width}.png"))
        finally:
            own_server.start()
        made += [rt.create_project(f"after {n}") for n in range(3)]
        qtbot.waitUntil(lambda: (window.status.refresh(), label.text() == "● live")[1], timeout=20_000)
        tree = window.tree.model
        qtbot.waitUntil(lambda: tree.rowCount() == len(made), timeout=20_000)  # reads that failed were redone
        shown = {tree.data(tree.index(row, 0)) for row in range(tree.rowCount())}
        assert shown == {f"{when} {n}" for when in ("before", "after") for n in range(3)}
    finally:
        writer.close()
    assert reloads, "no reload after the outage"
    assert len(seen) == len(set(seen)) and set(seen) <= set(made)  # nothing repeated


def test_an_agent_whose_requests_stopped_beating_is_not_waiting_for_you(world: Any, qtbot: Any) -> None:
    """Requests whose requester stopped beating (it died, or lost the server for good) are "requester gone":
    still pending, but nobody is behind them, so the status bar no longer counts their agent as waiting."""
    import sqlite3
    import time

    with sqlite3.connect(world.path) as conn:  # beat once, long ago: gone, by the queue's own rule
        conn.execute("UPDATE approvals SET requester_heartbeat_at = ?", (time.time() - 3600,))
    source = NativeSource.open(str(world.path))
    source.watch(poll_interval_s=0.02)
    services = Services.create(source, actor="tester", coalesce_ms=10)
    try:
        window = MainWindow(services)
        qtbot.addWidget(window)
        window.show()
        qtbot.waitUntil(lambda: window.queue_dock.windowTitle() == "Approvals (3 pending)")
        qtbot.waitUntil(lambda: window.status.pending_label.text() == "3 pending approvals")  # no agent waiting
        rt = AgentRuntime(source.store)
        rt.heartbeat(world.approval_ids[0]).tick()  # the agent is back and beats: it waits for you again
        qtbot.waitUntil(lambda: window.status.pending_label.text() == "3 pending approvals · 1 agent waiting for you",
                        timeout=10_000)
    finally:
        services.close()
        source.close()
