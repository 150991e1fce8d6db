"""A `RunDiff` as rows for one merged waterfall: where each bar goes, its class and its label text.

Qt-free and computed on the runner with the diff, so the view only paints. A
bar uses run B's times (rebased to B's start) for spans B has, and run A's
(rebased to A's start) for removed spans, so both runs share one time axis
starting at zero. Labels are agent text made visible (`shown_line`).
"""

from __future__ import annotations

from dataclasses import dataclass

from agentdesk.model.plain import shown_line
from agentdesk.store.analysis.align import Change, RunSpans
from agentdesk.store.analysis.run_diff import RunDiff
from agentdesk.store.text.durations import format_duration

LABEL_CHARS = 120


@dataclass(frozen=True)
class DiffRow:
    change: Change
    depth: int
    start: float
    end: float
    label: str
    kind: str
    detail: str
    """Durations A → B (or the one side's), for the tooltip and the right-hand column."""
    a_span: str | None
    b_span: str | None
    marks: str = ""
    """Operators' labels and notes on the span, per side ("A: needs-review · B: 1 note"); "" when none."""


@dataclass(frozen=True)
class DiffRows:
    diff: RunDiff
    rows: tuple[DiffRow, ...]
    span: float
    """Seconds the axis covers (the longer run)."""


def _times(spans: RunSpans, i: int, latest: float) -> tuple[float, float]:
    origin = spans.starts[0] if len(spans) else 0.0
    end = spans.ends[i]
    return spans.starts[i] - origin, (latest if end is None else end) - origin


def build_rows(diff: RunDiff) -> DiffRows:
    a, b = diff.spans_a, diff.spans_b
    latest_a = max([e for e in a.ends if e is not None] + list(a.starts[-1:]), default=0.0)
    latest_b = max([e for e in b.ends if e is not None] + list(b.starts[-1:]), default=0.0)
    rows: list[DiffRow] = []
    for pair in diff.alignment.pairs:
        if pair.b is not None:
            start, end = _times(b, pair.b, latest_b)
            kind, name = b.kinds[pair.b], b.names[pair.b]
        else:
            assert pair.a is not None
            start, end = _times(a, pair.a, latest_a)
            kind, name = a.kinds[pair.a], a.names[pair.a]
        da = a.duration(pair.a) if pair.a is not None else None
        db = b.duration(pair.b) if pair.b is not None else None
        if pair.a is not None and pair.b is not None:
            detail = f"{format_duration(da)} → {format_duration(db)}"
        else:
            detail = format_duration(db if pair.b is not None else da)
        a_id = a.ids[pair.a] if pair.a is not None else None
        b_id = b.ids[pair.b] if pair.b is not None else None
        marks = shown_line(diff.marks_line(a_id, b_id), LABEL_CHARS) if diff.marks_a or diff.marks_b else ""
        rows.append(DiffRow(pair.change, pair.depth, start, max(end, start), shown_line(name, LABEL_CHARS),
                            kind, detail, a_id, b_id, marks))
    span = max((r.end for r in rows), default=0.0)
    return DiffRows(diff, tuple(rows), max(span, 1e-6))
