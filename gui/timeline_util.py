"""Small drawing and formatting helpers shared by the timeline's items, axes and details pane."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from PySide6.QtCore import QRectF
from PySide6.QtGui import QPainter
from shiboken6 import Shiboken


def draw_rects(p: QPainter, rects: np.ndarray) -> None:
    """Draw an (n, 4) array of x, y, w, h in one call: QPainter reads the numpy memory as QRectF[n]."""
    if len(rects):
        rects = np.ascontiguousarray(rects, dtype=np.float64)
        first: Any = Shiboken.wrapInstance(rects.ctypes.data, QRectF)
        p.drawRects(first, len(rects))


def format_duration(seconds: float) -> str:
    """A short human duration: 850 µs, 12.3 ms, 4.56 s, 2 m 05 s, 1 h 02 m."""
    s = abs(seconds)
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    if s < 60:
        return f"{s:.2f} s"
    if s < 3600:
        return f"{int(s // 60)} m {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} m"


def time_label(value: float, spacing: float) -> str:
    """A tick label for seconds since run start, as precise as the tick spacing: 45 s, 2 m 30 s, 12 h."""
    sign, value = ("-" if value < 0 else ""), abs(value)
    places = max(0, math.ceil(-math.log10(spacing))) if 0 < spacing < 1 else 0
    hours, rest = divmod(value, 3600)
    minutes, secs = divmod(rest, 60)
    parts = []
    if hours >= 1:
        parts.append(f"{int(hours)} h")
    if minutes >= 1 and spacing < 3600:
        parts.append(f"{int(minutes)} m")
    if spacing < 60 and (secs >= 0.5 * 10 ** -places or not parts):
        parts.append(f"{secs:.{places}f} s")
    return sign + " ".join(parts or ["0 s"])


def compact(value: float) -> str:
    """1.2k, 3.4M, 5.6G: axis numbers that stay narrow."""
    size = abs(value)
    for limit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if size >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"
