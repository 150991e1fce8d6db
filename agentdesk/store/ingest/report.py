"""What one write of OTel spans did: the counts the importer, the receiver and their summaries show."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class IngestReport:
    """What one write did. `orphans_pending` counts spans still waiting for their parent after it."""

    spans_written: int = 0
    duplicates: int = 0
    completed: int = 0
    """Open spans that arrived again, ended, and were completed."""
    placed: int = 0
    """Orphans moved under a parent that arrived in this write."""
    orphans_pending: int = 0
    traces: int = 0
    run_ids: list[str] = field(default_factory=list)
    events_joined: int = 0
    """Log records (GenAI events, other logs) now on their span: they came first, or their span was stored."""
    events_waiting: int = 0
    """Log records kept for a span that has not arrived."""
    logs_unplaced: int = 0
    """Log records with no trace or span id: nothing to join them to (counted, named in the summary)."""
    retyped: int = 0
    """Stored spans whose kind or agent changed because spans of their trace arrived after them."""
    _known_runs: set[str] = field(default_factory=set, repr=False, compare=False)

    def add(self, other: IngestReport) -> None:
        self.spans_written += other.spans_written
        self.duplicates += other.duplicates
        self.completed += other.completed
        self.placed += other.placed
        self.orphans_pending += other.orphans_pending
        self.traces += other.traces
        self.events_joined += other.events_joined
        self.events_waiting += other.events_waiting
        self.logs_unplaced += other.logs_unplaced
        self.retyped += other.retyped
        known = self._known_runs
        if len(known) != len(self.run_ids):  # built once (run_ids is only ever extended here)
            known.clear()
            known.update(self.run_ids)
        for r in other.run_ids:  # a set beside the list: a 5,000-trace import summed in linear time
            if r not in known:
                known.add(r)
                self.run_ids.append(r)
