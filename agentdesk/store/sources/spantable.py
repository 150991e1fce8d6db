"""Building and narrowing a run's `SpanTable` from the rows a foreign runtime derives spans from."""

from __future__ import annotations

from collections.abc import Sequence

from agentdesk.store.readmodel import SpanTable


def only(table: SpanTable, span_ids: Sequence[str] | None) -> SpanTable:
    """`table` itself, or just its rows named in `span_ids` (in the table's order; unknown ids skipped).

    Foreign spans are derived from several tables of one run, so a source builds the
    run's table and narrows it: the live timeline then merges a handful of rows
    instead of replacing the whole run.
    """
    if span_ids is None:
        return table
    wanted = set(span_ids)
    keep = [n for n, span_id in enumerate(table.ids) if span_id in wanted]
    columns = (table.ids, table.parent_ids, table.kinds, table.names, table.statuses, table.starts, table.ends,
               table.input_tokens, table.output_tokens, table.costs)
    return SpanTable(*[[column[n] for n in keep] for column in columns])  # type: ignore[arg-type]
