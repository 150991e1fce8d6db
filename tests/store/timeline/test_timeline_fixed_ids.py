"""Ids read as one numpy array (`FixedIds`, `FixedKeys`) agree with ids read as lists of str and a dict."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdesk.store.analysis.layout.data import TimelineData
from agentdesk.store.timeline import columns
from agentdesk.store.timeline import packed as packed_read
from agentdesk.store.timeline import read as span_read
from agentdesk.store.timeline.id_index import FixedKeys
from agentdesk.store.timeline.strings import FixedIds, FixedParents, fixed_width
from tests.conftest import prebuilt

HEX = st.text("0123456789abcdef", min_size=16, max_size=16).map(lambda s: "spn_" + s)
ODD = st.text(st.characters(codec="utf-8", exclude_characters="\x1f"), max_size=12)
"""Any text a foreign store may hold as an id: NUL, control bytes, non-ASCII, empty."""


def _packed(values: list[str]) -> bytes:
    return "\x1f".join(values).encode()


def test_one_width_ids_are_the_bytes_viewed_as_an_array() -> None:
    ids = ["spn_0123456789abcdef", "spn_fedcba9876543210", "spn_00000000ffffffff"]
    raw = fixed_width(_packed(ids), 3)
    assert raw is not None and raw.dtype.itemsize % 8 == 0
    assert list(FixedIds(raw)) == ids and FixedIds(raw)[1] == ids[1] and FixedIds(raw)[1:] == ids[1:]


def test_mixed_widths_and_empty_parents_pad_and_read_back() -> None:
    parents = ["", "a", "spn_1", "", "longer-parent-id"]
    raw = fixed_width(_packed(parents), 5)
    assert raw is not None
    assert list(FixedParents(raw)) == [None, "a", "spn_1", None, "longer-parent-id"]
    assert list(FixedIds(raw)) == parents


@pytest.mark.parametrize("values", [["ascii", "n\u00e9"], ["nul\x00inside", "b"], ["trailing\x00", "b"]])
def test_values_that_would_not_round_trip_take_the_list_path(values: list[str]) -> None:
    assert fixed_width(_packed(values), len(values)) is None


def test_a_separator_inside_a_value_or_a_wild_width_takes_the_list_path() -> None:
    assert fixed_width(_packed(["a\x1fb", "c"]), 2) is None  # three values where two were counted
    assert fixed_width(_packed(["x" * 400] + ["y"] * 20), 21) is None  # one long id would pad 20 short ones
    assert fixed_width(None, 1) is None


def test_fixed_keys_find_ids_added_before_and_after() -> None:
    ids = [f"spn_{i:016x}" for i in range(50)]
    raw = fixed_width(_packed(ids), 50)
    assert raw is not None
    keys = FixedKeys.of(raw, np.arange(100, 150))
    assert keys is not None and keys.next_key == 150 and len(keys) == 50
    assert keys.get(ids[7]) == 107 and keys[ids[0]] == 100 and ids[49] in keys
    assert keys.get("spn_nope") is None and keys.get("n\u00e9") is None and keys.get("x" * 99, -1) == -1
    assert "spn_nope" not in keys and keys.get("spn_" + "0" * 15 + "\0") is None
    with pytest.raises(KeyError):
        keys["spn_nope"]
    assert keys.add(ids[3]) == 103 and keys.add("live-1") == 150 and keys.add("live-1") == 150
    assert keys.get("live-1") == 150 and keys.next_key == 151 and len(keys) == 51
    parents = fixed_width(_packed(["", ids[2], "unknown", ids[49], "a-parent-id-wider-than-any-span-id"]), 5)
    assert parents is not None
    assert keys.lookup(parents).tolist() == [-1, 102, -1, 149, -1]


def test_a_repeated_id_leaves_the_keys_to_the_dict() -> None:
    raw = fixed_width(_packed(["spn_a", "spn_b", "spn_a"]), 3)
    assert raw is not None and FixedKeys.of(raw, np.arange(3)) is None


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(HEX, ODD), min_size=1, max_size=30, unique=True), st.data())
def test_the_fixed_path_reads_what_the_list_path_reads(ids: list[str], data: st.DataObject) -> None:
    """Whenever `fixed_width` takes a column, it is the same strings, and the keys find what a dict finds."""
    parents = [data.draw(st.sampled_from(["", *ids, "missing"])) for _ in ids]
    raw_ids, raw_parents = fixed_width(_packed(ids), len(ids)), fixed_width(_packed(parents), len(ids))
    if raw_ids is None:
        assert any(not s.isascii() or "\0" in s for s in ids) or len(set(map(len, ids))) > 1
        return
    assert list(FixedIds(raw_ids)) == ids
    keys = FixedKeys.of(raw_ids, np.arange(len(ids)))
    assert keys is not None
    by_dict = {s: k for k, s in enumerate(ids)}
    for probe in [*ids, *parents, "missing"]:
        assert keys.get(probe) == by_dict.get(probe)
    if raw_parents is not None:
        assert list(FixedParents(raw_parents)) == [p or None for p in parents]
        assert keys.lookup(raw_parents).tolist() == [by_dict.get(p, -1) if p else -1 for p in parents]


def _store_with_ids(path: Path, ids: list[str]) -> tuple[object, str]:
    """A native store with one run whose spans carry these ids: span i's parent is span i // 2
    (0 a root), written row by row by SQL as another program would."""
    from agentdesk.store.native import NativeSource
    from agentdesk.store.runtime import AgentRuntime

    source = NativeSource.open(str(prebuilt(path)))
    rt = AgentRuntime(source.store)
    run = rt.start_run(rt.create_agent(rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s"),
                                       "a", "m"), "r")
    made = [rt.start_span(run, "tool", f"t{i}") for i in range(len(ids))]
    raw = sqlite3.connect(str(path))
    for i, (old, new) in enumerate(zip(made, ids, strict=True)):
        raw.execute("UPDATE spans SET id = ?, parent_span_id = ?, started_at = started_at + ? WHERE id = ?",
                    (new, ids[i // 2] if i else None, 0.001 * ((i * 7) % 5), old))
    raw.commit()
    raw.close()
    return source, run


def _same_layout(fast: columns.SpanColumns, slow: columns.SpanColumns) -> None:
    assert list(fast.ids) == list(slow.ids) and list(fast.parent_ids) == list(slow.parent_ids)
    a, b = TimelineData.from_columns(fast), TimelineData.from_columns(slow)
    assert list(a.ids) == list(b.ids) and a.parent.tolist() == b.parent.tolist()
    assert a.depth.tolist() == b.depth.tolist() and a.unknown_parent == b.unknown_parent
    for span_id in [*slow.ids, "not-a-span"]:
        assert a.lane_of.get(span_id) == b.lane_of.get(span_id)


@pytest.mark.parametrize("ids", [
    [f"spn_{i * 7919:016x}" for i in range(40)],  # one width: all fixed
    [f"s{i}" for i in range(40)],  # widths 2 and 3 in one slice: fixed, padded
    [f"spn_{i:016x}" if i < 20 else f"n\u00e9-{i}" for i in range(40)],  # some slices fixed, some lists
    [f"id\x01{i}" if i % 2 else f"id-{i:02d}" for i in range(40)],  # control bytes but ASCII
])
def test_a_native_read_keys_and_lays_out_as_the_row_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           ids: list[str]) -> None:
    """Slices of 8 rows: a run's slices mix the fixed and the list path; parents read before and
    after their children; a live span appended later is found by id."""
    monkeypatch.setattr(packed_read, "ROWID_SLICE", 8)
    source, run = _store_with_ids(tmp_path / "s.sqlite", ids)
    try:
        fast = span_read.span_columns(source, run)  # type: ignore[arg-type]
        with source.store.reading() as session:  # type: ignore[attr-defined]
            slow = span_read._rows(session, run, None)
        assert fast.keys is not None and isinstance(fast.ids, FixedIds) == all(s.isascii() for s in ids)
        assert isinstance(fast.keys.keys, FixedKeys) == isinstance(fast.ids, FixedIds)
        _same_layout(fast, slow)
        data = TimelineData.from_columns(fast)
        added = data.lane_of._keys.add("live-span")
        assert data.lane_of._keys.get("live-span") == added and data.lane_of._keys.get(ids[3]) is not None
    finally:
        source.close()  # type: ignore[attr-defined]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(HEX, ODD.filter(bool)), min_size=1, max_size=20, unique=True))
def test_any_ids_read_natively_lay_out_as_the_row_read(ids: list[str]) -> None:
    old_slice = packed_read.ROWID_SLICE
    packed_read.ROWID_SLICE = 4
    try:
        with tempfile.TemporaryDirectory() as folder:
            source, run = _store_with_ids(Path(folder) / "s.sqlite", ids)
            try:
                fast = span_read.span_columns(source, run)  # type: ignore[arg-type]
                with source.store.reading() as session:  # type: ignore[attr-defined]
                    slow = span_read._rows(session, run, None)
                _same_layout(fast, slow)
            finally:
                source.close()  # type: ignore[attr-defined]
    finally:
        packed_read.ROWID_SLICE = old_slice


@pytest.mark.parametrize(("column", "shift"), [("ended_at", 1e10), ("ended_at", -1e10), ("started_at", -1e10),
                                               ("cost_usd", 1e7), ("cost_usd", -1e7), ("ended_at", 0.0),
                                               ("input_tokens", 0.5), ("output_tokens", 0.0)])
def test_a_value_too_far_for_the_integers_is_seen_in_them(tmp_path: Path, column: str, shift: float) -> None:
    """No maxima asked of SQLite: a time ~300 years off (either way) or a cost of ten million dollars
    saturates SQLite's CAST, the packed read declines the run and the row read gives it; so does a
    token count that is no whole number (printed as it is); a value that fits (`shift` 0) packs."""
    from tests.store.analysis.test_timeline_data import _same, _two_runs

    source, (run,) = _two_runs(tmp_path, 1, 4)
    try:
        raw = sqlite3.connect(str(tmp_path / "s.sqlite"))
        span, value = raw.execute(f"SELECT id, ifnull({column}, 0) FROM spans WHERE run_id = ? AND ended_at IS NOT "
                                  "NULL LIMIT 1", (run,)).fetchone()
        far = value + shift * 1e9 if column.endswith("_at") else value + shift  # times: nanoseconds (0023)
        raw.execute(f"UPDATE spans SET {column} = ? WHERE id = ?", (far, span))
        raw.commit()
        raw.close()
        with source.store.reading() as session:
            conn, factory = span_read._bytes_cursor(session)
            cursor = conn.cursor()
            try:
                packed = packed_read._packed(cursor, run, None, packed_read._extent(cursor, run))
            finally:
                cursor.close()
                conn.text_factory = factory
            slow = span_read._rows(session, run, None)
        assert (packed is None) == (shift != 0.0)
        _same(span_read.span_columns(source, run), slow)
    finally:
        source.close()
