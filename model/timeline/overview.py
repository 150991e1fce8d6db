"""A run's spans summarised on a fixed grid, for the zoomed-out waterfall and the minimap.

Zoomed out over a million lanes, a pixel row holds hundreds of spans: drawing
them one by one costs a frame per pan. The grid is built once per layout, on
the runner: `GRID_ROWS` bands of consecutive lanes by `GRID_COLUMNS` slices of
time, each cell a bit mask of the span kinds present in it (a span marks every
cell its time covers). A frame then draws the visible part of one image, so its
cost follows the screen's pixels, not the span count. The minimap reads the
per-column totals: how many spans are active and how many failed there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agentdesk.model.timeline.data import ERROR, KINDS, TimelineData

GRID_ROWS = 1024
GRID_COLUMNS = 1024


@dataclass(frozen=True, slots=True)
class Overview:
    """Kinds present per (lane band, time slice); per time slice, spans active and failures started."""

    x0: float
    x1: float
    """The time range the columns cover (seconds since run start)."""
    lanes: int
    mask: np.ndarray
    """(rows, columns) uint8; bit k set when a span of kind `KINDS[k]` covers the cell."""
    active: np.ndarray
    """(columns,) spans active in each time slice."""
    failed: np.ndarray
    """(columns,) failed spans that started in each time slice."""

    @property
    def rows(self) -> int:
        return int(self.mask.shape[0])

    @property
    def columns(self) -> int:
        return int(self.mask.shape[1])

    def lanes_per_row(self) -> float:
        return self.lanes / max(self.rows, 1)

    def seconds_per_column(self) -> float:
        return (self.x1 - self.x0) / max(self.columns, 1)


def overview(data: TimelineData, now: float, rows: int = GRID_ROWS, columns: int = GRID_COLUMNS) -> Overview:
    """The grid for this layout (see the module docstring); O(spans + cells), no Python loop per span."""
    n = len(data)
    x0, x1 = data.extent(now)
    x1 = max(x1, x0 + 1e-6)
    rows = max(1, min(rows, n))
    if n == 0:
        empty = np.zeros(columns, dtype=np.int64)
        return Overview(x0, x1, 0, np.zeros((rows, columns), dtype=np.uint8), empty, empty)
    scale = columns / (x1 - x0)
    c0 = np.clip(((data.start - x0) * scale).astype(np.int64), 0, columns - 1)
    c1 = np.clip(((data.ends(now) - x0) * scale).astype(np.int64), 0, columns - 1)
    row = np.arange(n, dtype=np.int64) * rows // n
    width = columns + 1
    mask = np.zeros((rows, columns), dtype=np.uint8)
    for code in range(len(KINDS)):
        mine = np.flatnonzero(data.kind == code)
        if not len(mine):
            continue
        base = row[mine] * width
        cover = np.bincount(base + c0[mine], minlength=rows * width)
        cover -= np.bincount(base + c1[mine] + 1, minlength=rows * width)
        occupied = np.cumsum(cover.reshape(rows, width), axis=1)[:, :columns] > 0
        mask |= occupied.astype(np.uint8) << code
    active = np.cumsum(np.bincount(c0, minlength=width) - np.bincount(c1 + 1, minlength=width))[:columns]
    failed = np.bincount(c0[data.status == ERROR], minlength=columns)[:columns]
    return Overview(x0, x1, n, mask, active, failed)


def pooled(mask: np.ndarray, fy: int, fx: int) -> np.ndarray:
    """The mask with each `fy` x `fx` block of cells OR-ed into one: scaling a grid down by sampling
    would drop most rows (and the spans in them); pooling keeps every kind that is present."""
    rows, columns = mask.shape
    padded = np.zeros((-(-rows // fy) * fy, -(-columns // fx) * fx), dtype=mask.dtype)
    padded[:rows, :columns] = mask
    by_rows = np.bitwise_or.reduce(padded.reshape(-1, fy, padded.shape[1]), axis=1)
    return np.bitwise_or.reduce(by_rows.reshape(by_rows.shape[0], -1, fx), axis=2)
