"""Failed and open spans of the layout shown, kept up by the spans that changed (the run header's counts)."""

from __future__ import annotations

import math

import numpy as np

from agentdesk.store.analysis.layout.data import ERROR, TimelineData

RECOUNT_OVER = 4096
"""More changed spans than this at once: the header's counts are taken again over the whole run."""


class SpanCounts:
    """Failed and open spans of the layout shown, for the header, kept up by the spans that changed.

    Counting them over a million spans (two passes, ~1.5 ms) on every live refresh was most of the
    header's cost on the GUI thread. A full count (a load) keeps the flags it counted; a refresh
    then takes each changed span's flags as they were (from the last refresh that changed it, or
    from that count) away and adds them as they are now. The flags of a layout changed in place
    are gone once it changed, so the full count keeps copies.
    """

    def __init__(self) -> None:
        self.data: TimelineData | None = None
        """The layout the counts are for."""
        self.errors = self.open = 0
        self._base: TimelineData | None = None
        self._base_error = self._base_open = np.zeros(0, dtype=bool)
        self._seen: dict[str, tuple[bool, bool]] = {}
        """(failed, open) of each span changed since the full count, as last counted."""

    def count(self, data: TimelineData) -> None:
        """Count over the whole layout (a load, or too many changes at once)."""
        self._base_error, self._base_open = data.status == ERROR, data.open
        self.errors, self.open = int(np.count_nonzero(self._base_error)), int(np.count_nonzero(self._base_open))
        self.data, self._base, self._seen = data, data, {}

    def changed(self, data: TimelineData, span_ids: frozenset[str] | None) -> None:
        """`data` is the layout after these spans changed (None: any may have): counts for it."""
        if self.data is None or span_ids is None or len(span_ids) > RECOUNT_OVER or self._base is None:
            self.count(data)
            return
        base, seen = self._base, self._seen
        errors, running = self.errors, self.open
        for span_id in span_ids:
            lane = data.lane_of.get(span_id, -1)
            was = seen.get(span_id)
            if was is None:
                old = base.lane_of.get(span_id, -1)
                was = (bool(self._base_error[old]), bool(self._base_open[old])) if old >= 0 else (False, False)
            if lane < 0:
                if was != (False, False):  # a span counted is gone (a reload normally): count again
                    self.count(data)
                    return
                continue
            now = (bool(data.status[lane] == ERROR), bool(math.isnan(data.end[lane])))
            errors += now[0] - was[0]
            running += now[1] - was[1]
            seen[span_id] = now
        self.data, self.errors, self.open = data, errors, running
