"""A run's spans as columns for the timeline (`SpanColumns`), and any source's `SpanTable` as columns.

Numbers are numpy arrays, strings the compact columns of `strings`; a read of our own schema also
hands the layout its id index (`SpanKeys`). See `read.span_columns` for how a run is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentdesk.store.readmodel import SpanTable
from agentdesk.store.text.times import (
    EARLIEST_S,
    LATEST_S,
    NS_PER_S,
    READABLE_NS_BELOW,
    ns_column,
    seconds_column,
)
from agentdesk.store.timeline.id_index import SpanKeys
from agentdesk.store.timeline.strings import Coded, StringTable, take

_DTYPES = (np.float64, np.float64, np.int64, np.int64, np.float64)
"""start, end, input tokens, output tokens, cost."""


@dataclass(frozen=True, slots=True)
class SpanColumns:
    """Span columns in start order; times are seconds since the epoch, `end` NaN while open (our schema
    stores nanoseconds: the reads divide at this edge, where the layout wants float seconds).

    `total` is how many spans the run has, or with only the first spans asked for a lower bound:
    more than `len(self)` when the run has more (counting them all waits on the whole index, a
    second from a cold cache at a million spans; the whole read counts them anyway).
    """

    ids: Sequence[str]
    """A list, or `FixedIds` when the read packed them (`fixed_width`)."""
    parent_ids: Sequence[str | None]
    kinds: Coded
    names: Coded
    statuses: Coded
    start: np.ndarray
    end: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    cost: np.ndarray
    total: int
    keys: SpanKeys | None = None
    """Span id → key and the parents as keys, when the read built them (see `SpanKeys`)."""

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def complete(self) -> bool:
        return len(self.ids) >= self.total


class ColumnBuilder:
    """Appends row chunks to the columns: ids as strings, kinds, names and statuses coded, numbers as arrays."""

    def __init__(self, *, ns: bool = False) -> None:
        self.ns = ns
        """Times come as integer nanoseconds (our schema's spans, migration 0023), not seconds (a SpanTable)."""
        self.ids: list[str] = []
        self.parent_ids: list[str | None] = []
        self.kinds, self.names, self.statuses = (Coded(np.zeros(0, np.int32), StringTable()) for _ in range(3))
        self.numbers: list[list[np.ndarray]] = [[], [], [], [], []]

    def add(self, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.add_columns(list(zip(*rows, strict=True)))

    def add_columns(self, cols: Sequence[Sequence[Any]]) -> None:
        if not cols[0]:
            return
        self.ids.extend(cols[0])
        self.parent_ids.extend(cols[1])
        self.kinds, self.names, self.statuses = (
            coded + values for coded, values in zip((self.kinds, self.names, self.statuses), cols[2:5], strict=True))
        for n, (out, values, dtype) in enumerate(zip(self.numbers, cols[5:], _DTYPES, strict=True)):
            if n < 2:  # times: each unreadable one (±1e300, 9.2e18, text) the epoch, as foreign readers give it
                values = _times(values, open_ends=n == 1, ns=self.ns)
            try:
                array = np.array(values, dtype=np.float64)  # None becomes NaN: an open end, or a missing count
            except (TypeError, ValueError):  # a word where a count belongs: no count
                array = np.array([v if isinstance(v, int | float) else None for v in values], dtype=np.float64)
            out.append(array if dtype is np.float64 else np.nan_to_num(array, copy=False).astype(dtype))

    def columns(self, total: int | None = None) -> SpanColumns:
        start, end, input_tokens, output_tokens, cost = (
            np.concatenate(parts) if parts else np.zeros(0, dtype)
            for parts, dtype in zip(self.numbers, _DTYPES, strict=True))
        return SpanColumns(self.ids, self.parent_ids, self.kinds, self.names, self.statuses, start, end,
                           input_tokens, output_tokens, cost, total=len(self.ids) if total is None else total)


def _times(values: Sequence[Any], *, open_ends: bool, ns: bool = False) -> Sequence[Any]:
    """The time column in seconds: as it is (or divided, from nanoseconds) when every value is a readable
    time (checked in C), else mended value by value."""
    mended = ns_column if ns else seconds_column
    try:
        array = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return mended(values, open_ends=open_ends)
    known = array[~np.isnan(array)] if open_ends else array
    if ns and bool(((known >= 0) & (known < READABLE_NS_BELOW)).all()):
        return array / NS_PER_S  # type: ignore[return-value]  # an array: what the caller makes of it anyway
    if not ns and bool(((known >= EARLIEST_S) & (known <= LATEST_S)).all()):
        return values
    return mended(values, open_ends=open_ends)


def from_table(table: SpanTable) -> SpanColumns:
    """A `SpanTable` (any source, or a live view's changed rows) as columns, in start order."""
    builder = ColumnBuilder()
    order = np.argsort(np.asarray(table.starts, dtype=np.float64), kind="stable").tolist()
    builder.add_columns([take(c, order) for c in (table.ids, table.parent_ids, table.kinds, table.names,
                                                  table.statuses, table.starts, table.ends, table.input_tokens,
                                                  table.output_tokens, table.costs)])
    return builder.columns()
