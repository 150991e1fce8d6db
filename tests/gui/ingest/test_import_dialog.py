"""File → Import…: the dialog imports off the GUI thread, shows progress, and cancels to whole traces."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from pytestqt.qtbot import QtBot

from agentdesk.gui.ingest.dialog import ImportDialog, why_not_import
from agentdesk.model.context.model import ContextModel
from agentdesk.model.services import Services
from agentdesk.store.ingest.importer import ImportResult
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.schema import SpanRow
from agentdesk.store.source import Capability
from tests.conftest import prebuilt
from tests.store.ingest.traces import agent_trace, otlp_json


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    source = NativeSource.open(str(prebuilt(tmp_path / "store.sqlite")))
    made = Services.create(source)
    yield made
    made.close()
    source.close()


def trace_file(tmp_path: Path, traces: int = 3) -> Path:
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(otlp_json(agent_trace(service=f"svc{n}"))) + "\n" for n in range(traces)))
    return path


def spans(services: Services) -> int:
    source = services.source
    assert isinstance(source, NativeSource)
    with source.store.reading() as s:
        return s.query(SpanRow).count()


def test_the_dialog_imports_and_reports(qtbot: QtBot, services: Services, tmp_path: Path) -> None:
    assert why_not_import(services) is None
    dialog = ImportDialog(services, [trace_file(tmp_path)])
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.finished_import, timeout=30_000) as blocker:
        dialog.start()
    result = blocker.args[0]
    assert isinstance(result, ImportResult) and result.report.spans_written == 24
    assert dialog.phase.text() == "Import finished."
    assert "24 spans in 3 traces written" in dialog.detail.text()
    assert spans(services) == 24


def test_cancel_leaves_nothing_half_done(qtbot: QtBot, services: Services, tmp_path: Path) -> None:
    dialog = ImportDialog(services, [trace_file(tmp_path)])
    qtbot.addWidget(dialog)
    dialog._cancel()  # the operator presses Cancel before the first record is read whole
    with qtbot.waitSignal(dialog.finished_import, timeout=30_000):
        dialog.start()
    assert dialog.phase.text() == "Cancelled. Only whole traces were kept."
    assert spans(services) in (0, 8)  # at most the trace of the record already read, and then whole


def test_a_bad_file_is_one_sentence_in_the_dialog(qtbot: QtBot, services: Services, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"resourceSpans": [oops')
    dialog = ImportDialog(services, [bad])
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.finished_import, timeout=30_000):
        dialog.start()
    assert dialog.phase.text().startswith("Stopped at a bad record: ")
    assert "bad.json, line 1" in dialog.phase.text()


def test_imported_agents_context_is_read_only(qtbot: QtBot, services: Services, tmp_path: Path) -> None:
    dialog = ImportDialog(services, [trace_file(tmp_path, traces=1)])
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.finished_import, timeout=30_000):
        dialog.start()
    source = services.source
    project = source.projects()[0]
    session = source.sessions(source.tasks(project.id)[0].id)[0]
    agent = next(a for a in source.agents(session.id) if a.name == "planner")
    model = ContextModel(services)
    model.set_agent(agent.id)
    why = model.cannot(Capability.EDIT_ITEM)
    assert why is not None and "imported from OpenTelemetry" in why
    model.set_agent(None)


def test_a_file_that_is_not_otlp_says_what_it_is(qtbot: QtBot, services: Services, tmp_path: Path) -> None:
    path = tmp_path / "foo.json"
    path.write_text('{"foo": 1}')
    dialog = ImportDialog(services, [path])
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.finished_import, timeout=30_000):
        dialog.start()
    text = dialog.phase.text()
    assert "is not OTLP: it is a JSON object with keys foo; expected resourceSpans or resourceLogs" in text
    assert "Import finished" not in text and spans(services) == 0
