"""bench/timeline_bench.py's PostgreSQL comparison (issue 21): a backend past 1.5x SQLite's drawn times,
or showing another run, is named as missed (the bench then exits 1); within it, nothing is."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "timeline_bench.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("timeline_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _figures(first: float, navigable: float, warm: float | None = None, spans: int = 100) -> dict[str, Any]:
    out: dict[str, Any] = {"claimed": 100, "spans": spans, "rows": 40, "first_spans_ms": first,
                           "navigable_ms": navigable}
    if warm is not None:
        out["warm"] = {"first_spans_ms": warm, "navigable_ms": navigable}
    return out


def test_within_the_ratio_nothing_is_missed(bench: ModuleType) -> None:
    assert bench.compare(_figures(100, 400, 80), _figures(150, 600, 120)) == []


def test_a_slow_first_or_warm_open_is_missed(bench: ModuleType) -> None:
    missed = bench.compare(_figures(100, 400, 80), _figures(151, 400, 200))
    assert len(missed) == 2
    assert "first spans drawn (first open) 1.51x" in missed[0] and "(warm open) 2.50x" in missed[1]


def test_another_run_shown_is_missed(bench: ModuleType) -> None:
    missed = bench.compare(_figures(100, 400), _figures(100, 400, spans=99))
    assert missed and "PostgreSQL shows 99 spans" in missed[0]


def test_open_only_figures_report_without_the_frames(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    lite = dict(_figures(100, 400), build_s=None, stall_ms=5.0, rss_loaded_mb=100.0)
    assert bench.report([lite, dict(lite, backend="PostgreSQL")]) == []
    assert "PostgreSQL" in capsys.readouterr().out
