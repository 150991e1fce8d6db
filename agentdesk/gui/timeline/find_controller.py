"""Find in the timeline (Ctrl+F, F3): the find bar's query run on the store runner, its matches and the
one the operator is on.

The panel wires it: `changed` re-marks the rows and the minimap, `chosen` selects and reveals a lane.
A search answered for a layout that has since changed is asked again for the new one, keeping its place.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from agentdesk.gui.timeline.findbar import FindBar
from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask
from agentdesk.store.analysis.layout.data import TimelineData
from agentdesk.store.analysis.layout.tools import Matches, find


class FindController(QObject):
    changed = Signal()
    """The matches changed (found, cleared or failed): marks on the rows and the minimap follow."""
    chosen = Signal(int)
    """A lane to select and bring into view (F3 / Shift+F3, the first match)."""
    closed = Signal()
    """The find bar closed (Escape): the waterfall takes the keys again."""

    def __init__(self, services: Services, bar: FindBar, run: Callable[[], tuple[str | None, TimelineData | None]],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.services, self.bar, self._run = services, bar, run
        self.matches: Matches | None = None
        self.match_index = -1
        self._latest = LatestTask(services.runner, on_error=self._failed)
        bar.search.connect(self.find_spans)
        bar.step.connect(self.step)
        bar.closed.connect(self._bar_closed)

    def reset(self) -> None:
        """Another run: the search in flight and its matches are forgotten (the bar keeps its text)."""
        self._latest.cancel()
        self.matches, self.match_index = None, -1

    def find_spans(self, query: str, keep_place: bool = False) -> None:
        """Search the run (the store's query language, on the runner); matches outlined and counted."""
        self._latest.cancel()
        run_id, data = self._run()
        if not query.strip() or run_id is None or data is None:
            self.matches, self.match_index = None, -1
            self.changed.emit()
            self.bar.show_message("")
            return
        self.bar.show_message("searching…")
        place = self.match_index if keep_place else -1
        self._latest.start(self._find(run_id, query, data, place))

    def refresh(self, data: TimelineData) -> None:
        """The layout changed: matches found in an older one are looked for again, in place."""
        if self.matches is not None and self.matches.data is not data:
            self.find_spans(self.matches.query, keep_place=True)

    async def _find(self, run_id: str, query: str, data: TimelineData, place: int) -> None:
        self._found(await self.services.runner.run(find, self.services.source, run_id, query, data), place)

    def _found(self, matches: Matches, place: int) -> None:
        if matches.data is not self._run()[1]:
            self.find_spans(matches.query, keep_place=True)
            return
        self.matches = matches
        self.match_index = min(place, len(matches.lanes) - 1)
        self.changed.emit()
        if place < 0 and len(matches.lanes):
            self.step(1)
        else:
            self.bar.show_count(self.match_index, matches.total, len(matches.lanes))

    def _failed(self, exc: BaseException) -> None:
        self.matches = None
        self.changed.emit()
        self.bar.show_message(str(exc), error=True)

    def step(self, direction: int) -> None:
        """F3 / Shift+F3: select the next / previous match and bring it into view."""
        matches = self.matches
        if matches is None or not len(matches.lanes) or matches.data is not self._run()[1]:
            return
        self.match_index = (self.match_index + direction) % len(matches.lanes)
        self.chosen.emit(int(matches.lanes[self.match_index]))  # expands a collapsed ancestor first
        self.bar.show_count(self.match_index, matches.total, len(matches.lanes))

    def _bar_closed(self) -> None:
        self.find_spans("")
        self.closed.emit()
