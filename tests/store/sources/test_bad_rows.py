"""A bad row costs one row: each runtime with one unmappable approval row of each kind.

The queue must still list every other approval, unchanged, and the bad one as a row marked
"unreadable: why" with its stored values readable; nothing can decide it. Invalid UTF-8 is
read with replacement marks. A missing auxiliary table blanks only what needs it and is named
in the descriptor's notes. Read-only opening creates no -wal/-shm beside the file.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from agentdesk.store.errors import InvalidInput
from agentdesk.store.sources import open_source
from tests.store.sources.fixtures_lensagent import build_lensagent_fixture
from tests.store.sources.fixtures_maka import build_maka_fixture
from tests.store.sources.fixtures_stageflow import build_stageflow_fixture
from tests.store.sources.fixtures_vgxness import build_vgxness_fixture

YEAR_31_MILLION_ISO = "31000000-01-01T00:00:00.000Z"
YEAR_31_MILLION_MS = 10**18  # Unix milliseconds: 10^15 s, the year 31,690,708

BUILDERS: dict[str, Callable[[Path], object]] = {
    "maka": build_maka_fixture, "stageflow": build_stageflow_fixture, "vgxness": build_vgxness_fixture,
    "lensagent": build_lensagent_fixture,
}
TABLE = {"maka": ("core_interaction_requests", "request_id"), "stageflow": ("agent_approvals", "approval_id"),
         "vgxness": ("run_approvals", "id"), "lensagent": ("calls", "id")}
"""Where each runtime keeps one approval's row, and its id column."""
BAD_ROWS: dict[str, dict[str, tuple[str, object]]] = {
    # kind of damage → (column, stored value), per runtime
    "maka": {"impossible time": ("created_at", YEAR_31_MILLION_MS), "wrong type": ("created_at", "yesterday"),
             "blob": ("session_id", b"\x00\xff")},
    "stageflow": {"impossible time": ("created_at", YEAR_31_MILLION_ISO), "wrong type": ("created_at", 3.5e300),
                  "blob": ("payload_json", b"\x00\xff")},
    "vgxness": {"impossible time": ("requested_at", YEAR_31_MILLION_ISO), "wrong type": ("requested_at", "soon"),
                "blob": ("id", b"\x00\xff")},
    "lensagent": {"impossible time": ("created_at", YEAR_31_MILLION_ISO), "wrong type": ("created_at", "later"),
                  "blob": ("created_at", "99999999999999999999")},
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bad_rows")
    built = {}
    for kind, build in BUILDERS.items():
        built[kind] = root / f"{kind}.db"
        build(built[kind])
    return built


def copy(pristine: dict[str, Path], kind: str, tmp_path: Path) -> Path:
    path = tmp_path / f"{kind}.db"
    shutil.copyfile(pristine[kind], path)
    return path


def ids_and_statuses(path: Path) -> dict[str, str]:
    source = open_source(str(path))
    try:
        return {a.id: a.status for a in source.approvals("all")}
    finally:
        source.close()


def damage(path: Path, kind: str, victim: str, column: str, value: object) -> None:
    table, key = TABLE[kind]
    conn = sqlite3.connect(path)
    try:
        conn.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (value, victim))
        conn.commit()
    finally:
        conn.close()


CASES = [(kind, damage_kind) for kind, kinds in BAD_ROWS.items() for damage_kind in kinds]


@pytest.mark.parametrize(("kind", "damage_kind"), CASES, ids=[f"{k}-{d}" for k, d in CASES])
def test_one_bad_row_costs_one_row(pristine: dict[str, Path], tmp_path: Path, kind: str, damage_kind: str) -> None:
    path = copy(pristine, kind, tmp_path)
    before = ids_and_statuses(path)
    victim = next(aid for aid, status in before.items() if status == "pending")
    column, value = BAD_ROWS[kind][damage_kind]
    damage(path, kind, victim, column, value)
    source = open_source(str(path))
    try:
        after = source.approvals("all")
        pending = source.approvals("pending")
        bad = [a for a in after if a.status == "unreadable"]
        assert len(bad) == 1, [(a.id, a.status, a.reason) for a in after]
        (row,) = bad
        assert row.reason and row.reason.startswith("unreadable: "), row.reason
        assert row.arguments.strip().startswith("{") and column in row.arguments  # the stored row, readable
        others = {a.id: a.status for a in after if a is not row}
        assert others == {aid: s for aid, s in before.items() if aid != victim}
        assert row in pending or row.id in {a.id for a in pending}  # still in the queue, marked
        if column != TABLE[kind][1]:
            assert row.id == victim
            assert source.approval(victim).status == "unreadable"
    finally:
        source.close()


@pytest.mark.parametrize("kind", ["maka", "stageflow", "vgxness", "lensagent"])
def test_an_unreadable_row_cannot_be_decided(pristine: dict[str, Path], tmp_path: Path, kind: str) -> None:
    path = copy(pristine, kind, tmp_path)
    victim = next(aid for aid, status in ids_and_statuses(path).items() if status == "pending")
    column, value = BAD_ROWS[kind]["impossible time"]
    damage(path, kind, victim, column, value)
    source = open_source(str(path), allow_writes=True)
    try:
        with pytest.raises(InvalidInput, match="could not be read"):
            source.decide(victim, True, "ops", reason="ok")  # type: ignore[attr-defined]
    finally:
        source.close()
    assert ids_and_statuses(path)[victim] == "unreadable"


def test_a_malformed_json_outcome_in_maka(pristine: dict[str, Path], tmp_path: Path) -> None:
    """The reported case: SQLite's json_extract failed the whole query; now only that row is marked."""
    path = copy(pristine, "maka", tmp_path)
    before = ids_and_statuses(path)
    decided = next(aid for aid, status in before.items() if status == "denied")
    conn = sqlite3.connect(path)
    conn.execute("UPDATE core_interaction_outcomes SET record_json = '{not json' WHERE request_id = ?", (decided,))
    conn.commit()
    conn.close()
    after = ids_and_statuses(path)
    assert after == {**before, decided: "unreadable"}
    source = open_source(str(path))
    try:
        assert "not JSON" in (source.approval(decided).reason or "")
        assert len(source.approvals("pending")) == sum(s == "pending" for s in before.values())
        source.span_table(source.approval(decided).run_id)  # the timeline of that run still reads
    finally:
        source.close()


@pytest.mark.parametrize("kind", ["maka", "stageflow", "vgxness", "lensagent"])
def test_invalid_utf8_reads_with_replacement_marks(pristine: dict[str, Path], tmp_path: Path, kind: str) -> None:
    path = copy(pristine, kind, tmp_path)
    before = ids_and_statuses(path)
    victim = next(iter(before))
    table, key = TABLE[kind]
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE {table} SET {key} = CAST(? AS TEXT) WHERE {key} = ?", (b"bad\xff\xfeid", victim))
    conn.commit()
    conn.close()
    after = ids_and_statuses(path)
    assert len(after) == len(before)
    assert "bad\ufffd\ufffdid" in after


AUXILIARY = {"maka": "core_interaction_outcomes", "stageflow": "agent_eval_scores", "vgxness": "agents"}


@pytest.mark.parametrize("kind", sorted(AUXILIARY))
def test_a_missing_auxiliary_table_costs_only_its_feature(pristine: dict[str, Path], tmp_path: Path,
                                                          kind: str) -> None:
    path = copy(pristine, kind, tmp_path)
    before = ids_and_statuses(path)
    conn = sqlite3.connect(path)
    conn.execute(f"DROP TABLE {AUXILIARY[kind]}")
    conn.commit()
    conn.close()
    source = open_source(str(path))
    try:
        assert f"no {AUXILIARY[kind]} table" in source.descriptor.notes
        assert {a.id for a in source.approvals("all")} == set(before)
        projects = source.projects()
        assert projects
        run_id = source.approvals("all")[0].run_id
        if run_id:
            source.run(run_id)
            source.span_table(run_id)
        assert source.counts()
    finally:
        source.close()


def beside(path: Path) -> set[str]:
    return {p.name for p in path.parent.iterdir()}


@pytest.mark.parametrize("kind", ["maka", "stageflow", "vgxness", "lensagent"])
def test_reading_leaves_the_folder_as_it_was(pristine: dict[str, Path], tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = copy(pristine, kind, folder)
    files = beside(path)
    source = open_source(str(path))
    try:
        source.approvals("all")
        source.projects()
        source.counts()
        source.watch(poll_interval_s=0.05)
        source.poll_changes()
        if (path.read_bytes()[18:19]) == b"\x02":
            assert "opened immutable" in source.descriptor.notes
    finally:
        source.close()
    assert beside(path) == files


def test_a_runtime_that_starts_later_is_followed(pristine: dict[str, Path], tmp_path: Path) -> None:
    """Opened immutable (no -shm), the source switches to shared reading once the runtime writes."""
    path = copy(pristine, "stageflow", tmp_path)
    source = open_source(str(path))
    try:
        assert "opened immutable" in source.descriptor.notes
        source.prime_high_water()
        writer = sqlite3.connect(path)  # the runtime starts: its connection creates -shm
        writer.execute("UPDATE agent_approvals SET status = 'approved' WHERE status = 'pending'")
        writer.commit()
        changes = source.poll_changes()
        assert any(c.entity == "approval" for c in changes)
        assert "opened immutable" not in source.descriptor.notes
        writer.close()
    finally:
        source.close()
