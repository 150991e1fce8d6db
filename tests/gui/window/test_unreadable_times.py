"""A foreign row's impossible time shows as "unreadable time" in every view, never as a date in 1970.

One test per view type: the tree (sessions and runs), the timeline's span details, the context
(an item's title and the "as of" notes); plus the approvals' formatting and the float path
(timeline spans carry Unix seconds, 0.0 meaning unreadable).
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentdesk.model.approval_format import local_time, short_local_time
from agentdesk.model.tree.rows import row_fields
from agentdesk.store.sources import open_source
from agentdesk.store.sources.parsing import epoch, ms_time, time_of, time_of_epoch
from agentdesk.store.text.times import UNREADABLE_TIME, UNREADABLE_TIME_TEXT, is_unreadable, shown_time
from tests.store.sources.fixtures_stageflow import build_stageflow_fixture

IMPOSSIBLE = "31000000-01-01T00:00:00.000Z"


@pytest.fixture
def stageflow(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "stageflow.db"
    return path, build_stageflow_fixture(path)


def damage(path: Path, sql: str, *args: object) -> None:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute(sql, args).rowcount >= 1
        conn.commit()
    finally:
        conn.close()


def test_the_readers_mark_an_unreadable_time_and_it_orders_as_the_epoch() -> None:
    for value in (IMPOSSIBLE, "soon", 3.5e300):
        moment = time_of(value)
        assert is_unreadable(moment) and moment.timestamp() == 0.0
        assert moment < datetime(2000, 1, 1, tzinfo=UTC)
    assert is_unreadable(ms_time(10**18)) and not is_unreadable(ms_time(1_700_000_000_000))
    assert epoch(IMPOSSIBLE) == 0.0 and is_unreadable(time_of_epoch(epoch(IMPOSSIBLE)))
    assert not is_unreadable(time_of_epoch(1_700_000_000.5))
    assert shown_time(UNREADABLE_TIME, "%Y") == UNREADABLE_TIME_TEXT
    assert shown_time(datetime(2024, 5, 1, 12, 0, tzinfo=UTC), "%Y-%m-%d", local=False) == "2024-05-01"


def test_tree_rows_say_unreadable_time(stageflow: tuple[Path, dict[str, str]]) -> None:
    path, ids = stageflow
    damage(path, "UPDATE agent_sessions SET created_at = ? WHERE session_id = ?", IMPOSSIBLE, ids["session"])
    damage(path, "UPDATE agent_turns SET started_at = ? WHERE turn_id = ?", IMPOSSIBLE, ids["run"])
    source = open_source(str(path))
    try:
        session = next(s for s in source.sessions(ids["task"]) if s.id == ids["session"])
        run = source.run(ids["run"])
        others = [r for r in source.runs(ids["agent"]).items if r.id != ids["run"]]
    finally:
        source.close()
    assert row_fields(session).info == f"started {UNREADABLE_TIME_TEXT}"
    fields = row_fields(run)
    assert fields.info.startswith(UNREADABLE_TIME_TEXT) and "1970" not in fields.info + fields.tooltip
    assert others and all(UNREADABLE_TIME_TEXT not in row_fields(r).info for r in others)  # one row only


def test_timeline_span_details_say_unreadable_time(stageflow: tuple[Path, dict[str, str]], qtbot: object) -> None:
    from agentdesk.gui.timeline.details import SpanDetails

    path, ids = stageflow
    conn = sqlite3.connect(path)
    span_id = conn.execute("SELECT span_id FROM agent_spans WHERE turn_id = ? ORDER BY started_at LIMIT 1",
                           (ids["run"],)).fetchone()[0]
    conn.close()
    damage(path, "UPDATE agent_spans SET started_at = ? WHERE span_id = ?", IMPOSSIBLE, span_id)
    source = open_source(str(path))
    try:
        span = next(s for s in (source.span(sid) for sid in source.span_table(ids["run"]).ids)
                    if s.id.endswith(span_id) or s.id == span_id)
    finally:
        source.close()
    assert is_unreadable(span.started_at)
    details = SpanDetails()
    qtbot.addWidget(details)  # type: ignore[attr-defined]
    details._facts(span)
    assert details.facts["Started"].text() == UNREADABLE_TIME_TEXT


def test_context_items_say_unreadable_time(stageflow: tuple[Path, dict[str, str]]) -> None:
    from agentdesk.gui.context.detail import item_title
    from agentdesk.model.context.tree import ItemRow

    path, ids = stageflow
    damage(path, "UPDATE agent_messages SET created_at = ? WHERE session_id = ?", IMPOSSIBLE, ids["session"])
    source = open_source(str(path))
    try:
        context = source.context(ids["agent"])
    finally:
        source.close()
    assert context.items and all(is_unreadable(i.created_at) for i in context.items)
    title = item_title(ItemRow(context.items[0], "preview", covered=False, added_after=False))
    assert f"added {UNREADABLE_TIME_TEXT}" in title and "1970" not in title


def test_approval_times_say_unreadable_time() -> None:
    now = datetime.now(UTC)
    assert local_time(UNREADABLE_TIME) == UNREADABLE_TIME_TEXT
    assert short_local_time(UNREADABLE_TIME, now) == UNREADABLE_TIME_TEXT
    assert local_time(None) == "" and short_local_time(None, now) == ""
    assert "1970" not in local_time(UNREADABLE_TIME)


def test_the_cli_prints_null_and_the_words_not_the_epoch() -> None:
    from agentdesk.cli.output import iso

    assert iso(UNREADABLE_TIME) is None and iso(None) is None
    assert iso(datetime(2024, 5, 1, tzinfo=UTC)) == "2024-05-01T00:00:00.000+00:00"
