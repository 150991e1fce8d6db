"""Store search results as a Qt tree: one row per run, its hits below; the query runs on the runner.

A hit row carries (run id, span id) in `HIT_ROLE`, which is all the window needs to
open the run at the span. Every label is agent text made visible (`shown_line`).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel

from agentdesk.model.plain import shown_line
from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask
from agentdesk.store.errors import StoreError
from agentdesk.store.search.store_search import HitKind, StoreSearchResult, search_store

HIT_ROLE = Qt.ItemDataRole.UserRole + 1
"""(run_id, span_id or "") on every row: a run row opens the run, a hit row the run at its span."""
KIND_LABELS = {HitKind.SPAN: "span", HitKind.APPROVAL: "approval", HitKind.CONTEXT: "context item",
               HitKind.RUN: "run"}


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def summary(result: StoreSearchResult) -> str:
    parts = [_plural(n, KIND_LABELS[kind]) for kind, n in result.totals.items()]
    runs = _plural(len(result.groups), "run")
    slow = " (scanned run by run: this source has no search index)" if result.scanned else ""
    return f"{', '.join(parts)} in {runs}{slow}"


class SearchResults(QStandardItemModel):
    finished = Signal(str)
    """The summary line, or the one sentence saying why the query was refused."""

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._latest = LatestTask(services.runner, on_error=self._error)
        self.setHorizontalHeaderLabels(["Run / hit", "Kind", "Id"])
        self.last: StoreSearchResult | None = None

    def search(self, query: str) -> None:
        self._latest.start(self._search(query))

    async def _search(self, query: str) -> None:
        self._show(await self._services.runner.run(search_store, self._services.source, query))

    def _error(self, exc: BaseException) -> None:
        self.removeRows(0, self.rowCount())  # not clear(): that drops the columns and the view's header setup
        self.finished.emit(str(exc) if isinstance(exc, StoreError) else f"The search failed: {exc}.")

    def _show(self, result: StoreSearchResult) -> None:
        self.last = result
        self.removeRows(0, self.rowCount())
        root = self.invisibleRootItem()
        for group in result.groups:
            title = shown_line(group.title or group.run_id, 80)
            agent = f" · {shown_line(group.agent, 40)}" if group.agent else ""
            run_item = QStandardItem(f"{title}{agent} ({_plural(len(group.hits), 'hit')})")
            run_item.setData((group.run_id, ""), HIT_ROLE)
            run_row = [run_item, QStandardItem("run"), QStandardItem(group.run_id)]
            for hit in group.hits:
                item = QStandardItem(shown_line(hit.label, 160))
                item.setData((hit.run_id, hit.span_id or ""), HIT_ROLE)
                run_item.appendRow([item, QStandardItem(KIND_LABELS[hit.kind]), QStandardItem(hit.id)])
            for cell in run_row:
                cell.setEditable(False)
            root.appendRow(run_row)
        self.finished.emit(summary(result))
