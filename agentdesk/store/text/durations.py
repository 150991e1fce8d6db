"""The one way a duration is written, in the window and on the terminal alike.

Short units an operator can compare at a glance in a lane, a table column or a CLI line:
850 µs, 12.3 ms, 4.56 s, 2 m 05 s, 1 h 02 m. (humanize's `precisedelta` writes words —
"2 minutes and 5 seconds" — which do not fit a lane or line up in a column.)
"""

from __future__ import annotations


def format_duration(seconds: float | None, *, signed: bool = False, unknown: str = "running") -> str:
    """`seconds` in the unit that reads best; `signed` writes a difference (+1.20 s, -850 µs); None is
    `unknown` (a span still running, a side that has no such span)."""
    if seconds is None or seconds != seconds:  # None or NaN
        return unknown
    sign = ("-" if seconds < 0 else "+") if signed else ("-" if seconds < 0 else "")
    s = abs(seconds)
    if s < 1e-3:
        body = f"{s * 1e6:.0f} µs"
    elif s < 1:
        body = f"{s * 1e3:.1f} ms"
    elif s < 60:
        body = f"{s:.2f} s"
    elif s < 3600:
        body = f"{int(s // 60)} m {int(s % 60):02d} s"
    else:
        body = f"{int(s // 3600)} h {int(s % 3600 // 60):02d} m"
    return sign + body
