"""The window with 50,000 levels of nesting in agent JSON: shown with a marker, never a RecursionError.

Span attributes of our own store and approval arguments of a foreign one are written straight
into the file (no runtime API accepts such depth), then read through the models and widgets.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QModelIndex, Qt

from agentdesk.gui.approvals.queue import ApprovalQueue
from agentdesk.gui.timeline.panel import TimelinePanel
from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.sources import open_source
from tests.gui.conftest import World
from tests.store.sources.fixtures_stageflow import build_stageflow_fixture

DEEP = "[" * 50_000 + "]" * 50_000


@pytest.fixture
def errors(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Exceptions raised inside Qt virtual overrides (rowCount, data) reach sys.excepthook, not the test."""
    seen: list[str] = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, value, tb: seen.append(f"{kind.__name__}: {value}"))
    return seen


def test_span_with_deep_attributes_shows_a_marker(world: World, services: Services, qtbot: Any,
                                                  errors: list[str]) -> None:
    source = NativeSource.open(str(world.path))
    try:
        span = AgentRuntime(source.store).start_span(world.run_id, "tool", "deep")
    finally:
        source.close()
    with sqlite3.connect(world.path) as conn:
        conn.execute("UPDATE spans SET attributes = ? WHERE id = ?", ('{"payload": ' + DEEP + "}", span))
    panel = TimelinePanel(services)
    qtbot.addWidget(panel)
    panel.resize(1200, 700)
    panel.show()
    panel.show_run(world.run_id)
    qtbot.waitUntil(lambda: panel.data is not None and span in panel.data.lane_of, timeout=5000)
    panel.select_span(span)
    qtbot.waitUntil(lambda: panel.details.title.text() == "deep", timeout=5000)
    assert "could not load" not in panel.details.error.text().lower()
    assert "too deeply nested to display (50,001 levels)" in panel.details.attributes.edit.toPlainText()
    assert errors == []


def test_queue_with_deep_foreign_arguments(tmp_path: Path, qtbot: Any, errors: list[str]) -> None:
    path = tmp_path / "stageflow.db"
    ids = build_stageflow_fixture(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE agent_approvals SET payload_json = ? WHERE approval_id = ?",
                     (DEEP, ids["pending_approval"]))
    source = open_source(str(path))
    services = Services.create(source, actor="tester", coalesce_ms=10)
    try:
        queue = ApprovalQueue(services)
        qtbot.addWidget(queue)
        queue.resize(1200, 800)
        queue.show()
        model = queue.pending_model
        qtbot.waitUntil(lambda: model.is_loaded and model.row_of(ids["pending_approval"]) >= 0, timeout=5000)
        row = model.row_of(ids["pending_approval"])
        for column in range(model.columnCount()):
            for role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
                model.index(row, column).data(role)
        assert model.rowCount(QModelIndex()) >= 1
        queue.pending_table.selectRow(row)
        details = queue.details  # the payload is shown, to its last rendered slice
        qtbot.waitUntil(lambda: details.shown_hash(ids["pending_approval"]) is not None
                        and not details.loader.running, timeout=5000)
        assert details.arguments.toPlainText() != ""
        queue.grab()
        assert errors == []
    finally:
        services.close()
        source.close()


def test_queue_shows_an_unreadable_row(tmp_path: Path, qtbot: Any, errors: list[str]) -> None:
    """The reported case: one impossible time emptied the window's queue while the tree said "1 pending"."""
    path = tmp_path / "stageflow.db"
    ids = build_stageflow_fixture(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE agent_approvals SET created_at = '31000000-01-01T00:00:00.000Z' WHERE approval_id = ?",
                     (ids["pending_approval"],))
    source = open_source(str(path))
    services = Services.create(source, actor="tester", coalesce_ms=10)
    try:
        queue = ApprovalQueue(services)
        qtbot.addWidget(queue)
        model = queue.pending_model
        qtbot.waitUntil(lambda: model.is_loaded, timeout=5000)
        row = model.row_of(ids["pending_approval"])
        assert row >= 0
        assert str(model.index(row, 0).data()).startswith("unreadable: created_at")
        assert errors == []
    finally:
        services.close()
        source.close()
