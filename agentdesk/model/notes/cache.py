"""Which runs and spans carry notes or labels: one cache per window, read on the runner, kept by the bus.

The tree marks runs, the timeline flags spans, the detail panes list a target's notes: all of them ask this
cache, never the store, so a paint never waits on I/O. A note or label written anywhere (this window, another
window, the CLI) arrives as a `note`/`label` change and the cache reads again what it holds (marks are few).
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QObject, Signal

from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask
from agentdesk.store.notes import reads
from agentdesk.store.notes.marks import Marks
from agentdesk.store.persistence.bus import Change, ChangeOp, EntityKind
from agentdesk.store.persistence.database import Store, own_store

MARK_ENTITIES = frozenset({EntityKind.NOTE, EntityKind.LABEL})


def run_mark_text(count: int, labels: tuple[str, ...]) -> str:
    """What a marked run shows beside its name: "⚑ needs-review, regression · 2 notes"."""
    parts = [", ".join(labels)] if labels else []
    if count:
        parts.append(f"{count} note{'s' if count != 1 else ''}")
    return "⚑ " + " · ".join(parts)


class MarksCache(QObject):
    changed = Signal()
    """Marked runs or the watched run's marked spans changed: views repaint from the cache."""

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.services = services
        store = own_store(services.source)
        self.store: Store | None = store if store is not None and reads.readable(store) else None
        """None: the source keeps no notes (another runtime's database) or this login may not read them."""
        self.runs: dict[str, tuple[int, tuple[str, ...]]] = {}
        self.spans: dict[str, Marks] = {}
        """The watched run's marked spans, by span id."""
        self.run_id: str | None = None
        self._runs_latest = LatestTask(services.runner)
        self._spans_latest = LatestTask(services.runner)
        services.bridge.changes.connect(self._on_changes)
        self.reload()

    @property
    def enabled(self) -> bool:
        return self.store is not None

    def reload(self) -> None:
        if self.store is None:
            return
        self._runs_latest.start(self._read_runs(self.store))
        self._load_spans()

    def watch_run(self, run_id: str | None) -> None:
        """The run the timeline shows: its spans' marks are kept (the flags)."""
        if run_id == self.run_id:
            return
        self.run_id, self.spans = run_id, {}
        self._load_spans()
        self.changed.emit()

    def run_text(self, run_id: str) -> str:
        found = self.runs.get(run_id)
        return run_mark_text(*found) if found else ""

    def _load_spans(self) -> None:
        if self.store is None or self.run_id is None:
            self._spans_latest.cancel()
            return
        self._spans_latest.start(self._read_spans(self.store, self.run_id))

    async def _read_runs(self, store: Store) -> None:
        runs: dict[str, tuple[int, tuple[str, ...]]] = await self.services.runner.run(reads.every_marked_run, store)
        if runs != self.runs:
            self.runs = runs
            self.changed.emit()

    async def _read_spans(self, store: Store, run_id: str) -> None:
        spans: dict[str, Marks] = await self.services.runner.run(reads.marks_in_run, store, run_id, "span")
        if spans != self.spans:
            self.spans = spans
            self.changed.emit()

    def _on_changes(self, changes: Sequence[Change]) -> None:
        if any(c.entity in MARK_ENTITIES or c.op == ChangeOp.RESET for c in changes):
            self.reload()
