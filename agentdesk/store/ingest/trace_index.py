"""The compact facts of a trace's spans (no payloads): where each span goes, known before any is written.

Why apart from the writer: the importer builds an index from its spill file (or memory) before it takes
the write lock, and sorts and checks it there (start order, loops), so the writer's transaction only
places spans. Pure data: no store, no SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentdesk.store.ingest.prepare import Prepared


@dataclass(slots=True)
class IndexEntry:
    parent_id: str | None
    agent_key: str | None
    agent_name: str | None
    start_ns: int


@dataclass
class TraceIndex:
    """The compact facts of one trace's spans (no payloads): enough to place every span."""

    trace_id: str
    spans: dict[str, IndexEntry] = field(default_factory=dict)
    project: str | None = None
    conversation: str | None = None
    root_span: str | None = None
    root_name: str | None = None
    root_start: int = 0
    """The root's start: of several roots the earliest (then the smallest id) is the trace's, whatever order
    the spans arrive in (`receive` in pieces and `import` whole choose the same one)."""
    _by_start: list[tuple[str, IndexEntry]] | None = field(default=None, repr=False, compare=False)
    _cycle: tuple[int, str | None] | None = field(default=None, repr=False, compare=False)

    def add(self, p: Prepared) -> None:
        self.note(p.span_id, p.parent_id, p.agent_key, p.agent_name, p.start_ns, p.project, p.conversation,
                  p.name)

    def note(self, span_id: str, parent_id: str | None, agent_key: str | None, agent_name: str | None,
             start_ns: int, project: str | None, conversation: str | None, name: str) -> None:
        self.spans[span_id] = IndexEntry(parent_id, agent_key, agent_name, start_ns)
        if self.project is None and project:
            self.project = project
        if self.conversation is None and conversation:
            self.conversation = conversation
        if parent_id is None and (self.root_span is None
                                  or (start_ns, span_id) < (self.root_start, self.root_span)):
            self.root_span, self.root_name, self.root_start = span_id, name, start_ns

    def by_start(self) -> list[tuple[str, IndexEntry]]:
        """The spans in start order, sorted once (a staged write sorts before taking the lock)."""
        if self._by_start is None or len(self._by_start) != len(self.spans):
            self._by_start = sorted(self.spans.items(), key=lambda kv: kv[1].start_ns)
        return self._by_start

    def cycle(self) -> str | None:
        """A span that is its own ancestor (hostile or broken input), or None. O(spans), iterative;
        the answer is kept (a staged write asks before taking the lock, `prepare` again under it)."""
        if self._cycle is not None and self._cycle[0] == len(self.spans):
            return self._cycle[1]
        found = self._find_cycle()
        self._cycle = (len(self.spans), found)
        return found

    def _find_cycle(self) -> str | None:
        done: set[str] = set()
        for start in self.spans:
            path: list[str] = []
            on_path: set[str] = set()
            current: str | None = start
            while current is not None and current not in done:
                if current in on_path:
                    return current
                on_path.add(current)
                path.append(current)
                entry = self.spans.get(current)
                current = entry.parent_id if entry is not None else None
            done.update(path)
        return None
