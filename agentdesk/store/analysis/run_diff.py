"""Diff two runs through the `Source` seam: the alignment, the totals, and what the model saw differently.

Reads only what a source offers every view (`run`, `span_table`, `span` for
tool calls' arguments, `sent_context` for model calls), so it works the same
on a foreign runtime's database. The two runs may come from two sources.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field, replace

from agentdesk.store import readmodel as rm
from agentdesk.store.analysis.align import Alignment, Change, RunSpans, align
from agentdesk.store.notes.marks import Marks
from agentdesk.store.notes.reads import marks_in_run, readable
from agentdesk.store.persistence.database import own_store
from agentdesk.store.source import Source

MAX_ARGUMENT_READS = 20_000
"""Tool calls whose arguments are read for the label; beyond it tools pair by name alone (stated in
`RunDiff.notes`), so a huge run's diff does not read a hundred thousand payloads."""
MAX_CONTEXT_PAIRS = 500
"""Paired model calls whose sent context is compared, first ones first."""


@dataclass(frozen=True)
class Totals:
    spans: int
    tokens: int
    cost_usd: float
    duration_s: float | None
    errors: int


@dataclass(frozen=True)
class ContextDelta:
    """At one pair of aligned model calls: the items one call sent and the other did not."""

    a_span: str
    b_span: str
    name: str
    only_a: tuple[rm.SentItem, ...]
    only_b: tuple[rm.SentItem, ...]


@dataclass(frozen=True)
class RunDiff:
    run_a: rm.Run
    run_b: rm.Run
    spans_a: RunSpans
    spans_b: RunSpans
    alignment: Alignment
    totals_a: Totals
    totals_b: Totals
    contexts: tuple[ContextDelta, ...]
    notes: tuple[str, ...] = ()
    marks_a: dict[str, Marks] = field(default_factory=dict)
    """Operators' notes and labels on run A's spans, by span id (empty for a source without notes)."""
    marks_b: dict[str, Marks] = field(default_factory=dict)

    def marks_line(self, a_span: str | None, b_span: str | None) -> str:
        """ "A: needs-review, 1 note · B: regression": what operators left on each side of a row, or "". """
        sides = [(side, marks.get(span or "")) for side, marks, span in (("A", self.marks_a, a_span),
                                                                         ("B", self.marks_b, b_span))]
        return " · ".join(f"{side}: {describe(m)}" for side, m in sides if m is not None and not m.empty)


def describe(marks: Marks) -> str:
    """Labels, then how many notes: "needs-review, regression, 2 notes"."""
    parts = list(marks.label_names)
    if marks.notes:
        parts.append(f"{len(marks.notes)} note{'s' if len(marks.notes) != 1 else ''}")
    return ", ".join(parts)


def span_marks(source: Source, run_id: str) -> dict[str, Marks]:
    """The notes and labels on a run's spans, when the source keeps them (agentdesk's own store)."""
    store = own_store(source)
    return {} if store is None or not readable(store) else marks_in_run(store, run_id, "span")


def load_spans(source: Source, run_id: str, argument_budget: int = MAX_ARGUMENT_READS) -> tuple[RunSpans, bool]:
    """A run's spans for aligning, and whether every tool call's arguments were read."""
    table = source.span_table(run_id)
    index = {span_id: i for i, span_id in enumerate(table.ids)}
    parents = [index.get(p, -1) if p is not None else -1 for p in table.parent_ids]
    tools = [i for i, kind in enumerate(table.kinds) if kind == "tool"]
    arguments: list[str | None] = [None] * len(table)
    complete = len(tools) <= argument_budget
    for i in tools[:argument_budget] if complete else []:
        text = source.span(table.ids[i]).input_text or ""
        arguments[i] = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return RunSpans(table.ids, parents, table.kinds, table.names, table.statuses, table.starts, table.ends,
                    arguments if complete else []), complete


def totals(run: rm.Run, spans: RunSpans) -> Totals:
    ends = [e for e in spans.ends if e is not None]
    duration = (max(ends) - min(spans.starts)) if ends and len(spans) else None
    if run.ended_at is not None:
        duration = (run.ended_at - run.started_at).total_seconds()
    errors = sum(1 for s in spans.statuses if s == rm.SpanStatus.ERROR)
    return Totals(len(spans), run.usage.total_tokens, run.usage.cost_usd, duration, errors)


def context_deltas(source_a: Source, source_b: Source, diff: Alignment, a: RunSpans, b: RunSpans,
                   limit: int = MAX_CONTEXT_PAIRS) -> list[ContextDelta]:
    """For aligned model-call pairs: the sent items (by role, kind and content) only one side had."""
    out: list[ContextDelta] = []
    model_pairs = [(p.a, p.b) for p in diff.matched()
                   if p.a is not None and p.b is not None and a.kinds[p.a] == rm.SpanKind.MODEL]
    for ia, ib in model_pairs[:limit]:
        sent_a, sent_b = source_a.sent_context(a.ids[ia]), source_b.sent_context(b.ids[ib])
        only_a, only_b = _unmatched(sent_a, sent_b)
        if only_a or only_b:
            out.append(ContextDelta(a.ids[ia], b.ids[ib], a.names[ia], only_a, only_b))
    return out


def _unmatched(sent_a: list[rm.SentItem], sent_b: list[rm.SentItem]) -> tuple[tuple[rm.SentItem, ...],
                                                                             tuple[rm.SentItem, ...]]:
    left, right = Counter(map(_key, sent_a)), Counter(map(_key, sent_b))
    return tuple(_take(sent_a, left - right)), tuple(_take(sent_b, right - left))


def _key(item: rm.SentItem) -> tuple[str | None, str, str]:
    return item.role, item.kind, item.content


def _take(items: list[rm.SentItem], wanted: Counter[tuple[str | None, str, str]]) -> list[rm.SentItem]:
    """The items `wanted` counts, the later copies of a repeated item first to go (they are the extra ones)."""
    remaining = Counter(wanted)
    out = []
    for item in reversed(items):
        if remaining[_key(item)] > 0:
            remaining[_key(item)] -= 1
            out.append(item)
    return out[::-1]


def diff_runs(source: Source, run_a: str, run_b: str, other: Source | None = None, *,
              contexts: bool = True) -> RunDiff:
    """Run A (in `source`) against run B (in `other`, default the same source); `NotFound` if either is absent."""
    source_b = other or source
    a_run, b_run = source.run(run_a), source_b.run(run_b)
    spans_a, full_a = load_spans(source, run_a)
    spans_b, full_b = load_spans(source_b, run_b)
    notes: list[str] = []
    if not (full_a and full_b):
        spans_a, spans_b = replace(spans_a, arguments=()), replace(spans_b, arguments=())
        notes.append(f"Tool calls are paired by name only: a run has more than {MAX_ARGUMENT_READS:,} of them.")
    alignment = align(spans_a, spans_b)
    deltas = context_deltas(source, source_b, alignment, spans_a, spans_b) if contexts else []
    return RunDiff(a_run, b_run, spans_a, spans_b, alignment, totals(a_run, spans_a), totals(b_run, spans_b),
                   tuple(deltas), tuple(notes), span_marks(source, run_a), span_marks(source_b, run_b))


def summary_line(diff: RunDiff) -> str:
    """ "12 same, 3 slower, 1 faster, 2 added, 0 removed" """
    counts = diff.alignment.counts()
    return ", ".join(f"{counts[c]} {c.value}" for c in (Change.SAME, Change.SLOWER, Change.FASTER,
                                                        Change.ADDED, Change.REMOVED))
