"""Computes a run diff on the runner, awaited on the qasync loop (a newer request cancels the older)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from agentdesk.model.diff.rows import DiffRows, build_rows
from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask
from agentdesk.store import readmodel as rm
from agentdesk.store.analysis.run_diff import diff_runs
from agentdesk.store.errors import StoreError
from agentdesk.store.readmodel import Page
from agentdesk.store.source import Source


def _compute(source: Source, run_a: str, run_b: str) -> DiffRows:
    return build_rows(diff_runs(source, run_a, run_b))


def _candidates(source: Source, run_id: str) -> list[rm.Run]:
    """Runs to compare `run_id` with: its agent's other runs, newest first."""
    run = source.run(run_id)
    page: Page[rm.Run] = source.runs(run.agent_id, limit=200)
    return [r for r in page.items if r.id != run_id]


class DiffLoader(QObject):
    loaded = Signal(object)
    """DiffRows."""
    failed = Signal(str)
    """One sentence: a run is missing, the store is busy."""
    candidates = Signal(object)
    """list[rm.Run]: other runs of run A's agent."""

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._latest = LatestTask(services.runner, on_error=self._error)
        self._runs = LatestTask(services.runner, on_error=self._error)

    def compare(self, run_a: str, run_b: str) -> None:
        self._latest.start(self._compare(run_a, run_b))

    async def _compare(self, run_a: str, run_b: str) -> None:
        self.loaded.emit(await self._services.runner.run(_compute, self._services.source, run_a, run_b))

    def find_candidates(self, run_id: str) -> None:
        self._runs.start(self._find_candidates(run_id))

    async def _find_candidates(self, run_id: str) -> None:
        self.candidates.emit(await self._services.runner.run(_candidates, self._services.source, run_id))

    def _error(self, exc: BaseException) -> None:
        self.failed.emit(str(exc) if isinstance(exc, StoreError) else f"The diff failed: {exc}.")
