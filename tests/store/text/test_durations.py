"""One duration formatter for the window and the CLI."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from agentdesk.store.text.durations import format_duration


def test_each_unit_reads_best() -> None:
    assert [format_duration(s) for s in (0.00085, 0.0123, 4.56, 125, 3720)] == \
        ["850 µs", "12.3 ms", "4.56 s", "2 m 05 s", "1 h 02 m"]


def test_unknown_and_signed() -> None:
    assert format_duration(None) == "running"
    assert format_duration(None, unknown="-") == "-"
    assert format_duration(math.nan) == "running"
    assert format_duration(1.2, signed=True) == "+1.20 s"
    assert format_duration(-0.00085, signed=True) == "-850 µs"
    assert format_duration(-2.0) == "-2.00 s"


@given(st.floats(min_value=-1e7, max_value=1e7, allow_nan=False))
def test_a_difference_carries_its_sign_and_the_magnitude_is_the_unsigned_text(seconds: float) -> None:
    signed = format_duration(seconds, signed=True)
    assert signed[0] in "+-" and signed[1:] == format_duration(abs(seconds))
