"""What the foreign-view tests need per seed runtime: its fixture, a writer, and an opened window.

Each `Kind` names the fixture builder, the run a writer subprocess extends (with the
seed's own SQL, reused from `tests/store/sources/`), and the ids that writer creates, so the
view tests can stay one parametrised body for all four systems.
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentdesk.gui.window.main_window import MainWindow
from agentdesk.model.services import Services
from agentdesk.store.source import Source
from agentdesk.store.sources import open_source
from tests.store.sources.fixtures_lensagent import build_lensagent_fixture
from tests.store.sources.fixtures_maka import build_maka_fixture
from tests.store.sources.fixtures_stageflow import build_stageflow_fixture
from tests.store.sources.fixtures_vgxness import build_vgxness_fixture
from tests.store.sources.foreign_helpers import run_python
from tests.store.sources.test_lensagent import RUNTIME_WRITES as LENSAGENT_WRITER
from tests.store.sources.test_maka_live import WRITER as MAKA_WRITER
from tests.store.sources.test_stageflow import WRITER as STAGEFLOW_WRITER
from tests.store.sources.test_vgxness import WRITER as VGXNESS_WRITER


@dataclass(frozen=True)
class Kind:
    """One seed runtime as the view tests see it."""

    name: str
    build: Callable[[Path], dict[str, str]]
    live_run: str
    """The run the writer adds spans to (shown in the timeline while it writes)."""
    writer: str
    steps: tuple[tuple[str, ...], ...]
    """Arguments after the database path, one writer process per entry."""
    new_approval: str
    new_spans: tuple[str, ...]
    context_agent: str
    """An agent whose context the editor shows in the write tests."""
    editable_item: str | None = None
    """An item the operator may edit when writes are allowed (systems with EDIT_ITEM)."""

    def __str__(self) -> str:
        return self.name

    def write(self, path: Path) -> None:
        """The runtime, in another process, commits its next rows."""
        for step in self.steps:
            run_python(self.writer, str(path), *step)


KINDS = (
    Kind("lensagent", build_lensagent_fixture, "run_d", LENSAGENT_WRITER, ((),), "cal_live",
         ("call:cal_live",), "agt_main", editable_item="ci_4"),
    Kind("stageflow", build_stageflow_fixture, "trn_rc3", STAGEFLOW_WRITER, (("span",), ("approval", "3600")),
         "apr_live", ("sp_live",), "ses_rc/release-captain"),
    Kind("vgxness", build_vgxness_fixture, "run_wait", VGXNESS_WRITER, (("event",), ("approval",)),
         "apv_live", ("rev_live", "chk_live"), "agt_planner"),
    Kind("maka", build_maka_fixture, "ses_grand/run_g1", MAKA_WRITER, ((),), "req_live",
         ("tool:ses_grand/run_g1/live_1",), "agent:ses_grand"),
)


def digest(path: Path) -> dict[str, str]:
    """sha256 of the database and its WAL; an absent WAL counts as empty (no bytes were written)."""
    out = {}
    for suffix in ("", "-wal"):
        file = Path(f"{path}{suffix}")
        out[suffix or "db"] = hashlib.sha256(file.read_bytes() if file.exists() else b"").hexdigest()
    return out


def tip(widget: Any) -> str:
    """A control's tooltip as the operator reads it (the views escape it for Qt's rich text)."""
    return html.unescape(widget.toolTip())


class Opened:
    """A foreign database opened as the app does: source, watcher, services and the main window."""

    def __init__(self, qtbot: Any, path: Path, *, allow_writes: bool = False) -> None:
        self.path = path
        self.source: Source = open_source(str(path), allow_writes=allow_writes)
        self.source.watch(poll_interval_s=0.02)
        self.services = Services.create(self.source, actor="tester", coalesce_ms=10)
        self.window = MainWindow(self.services)
        qtbot.addWidget(self.window)
        self.window.show()
        self._closed = False

    def close(self) -> None:
        """Window first (it stops the context reloads), then the runner and bridge, then the source."""
        if self._closed:
            return
        self._closed = True
        self.window.close()
        self.services.close()
        self.source.close()
