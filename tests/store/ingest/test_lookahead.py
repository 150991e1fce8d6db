"""Probes asked ahead (store/ingest/lookahead.py, probe.Ahead): on PostgreSQL an import asks where a
transaction's traces go in one statement, before it writes any of them. The answers must still be true when
each trace is written: a trace earlier in the same transaction may have created the session a later one is
filed under, or deleted it. Both backends must file every trace the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from agentdesk.store.ingest import importer
from agentdesk.store.ingest.importer import import_files
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from tests.store.ingest.traces import agent_trace, otlp_json

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)


def filed(store: Store) -> tuple[set[tuple[str, str]], set[str]]:
    """(run title, session title) of every run, and the sessions there are."""
    with store.reading() as s:
        runs = {(str(run.title), str(session.title)) for run, session in
                s.execute(select(sc.RunRow, sc.SessionRow).join(sc.SessionRow,
                                                                sc.SessionRow.id == sc.RunRow.session_id))}
        sessions = {str(t) for t in s.scalars(select(sc.SessionRow.title))}
    return runs, sessions


def lines(path: Path, *traces: list) -> Path:  # type: ignore[type-arg]
    path.write_text("".join(json.dumps(otlp_json(t)) + "\n" for t in traces))
    return path


def test_traces_sharing_conversations_in_one_transaction_share_their_sessions(
        tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importer, "IMPORT_SLICE_S", 60.0)  # one transaction, however slow the machine
    # 30 traces over 3 conversations: the first of each creates the session the others were asked about
    # (one service: one project, made by the first trace for the 29 others)
    traces = [agent_trace(service="svc", conversation=f"c{n % 3}", calls=1) for n in range(30)]
    result = import_files(store, [lines(tmp_path / "t.jsonl", *traces)], helper=False)
    assert result.report.traces == 30 and result.error is None
    assert filed(store)[1] == {"c0", "c1", "c2"}
    with store.reading() as s:
        per_session = {t: s.query(sc.RunRow).join(sc.SessionRow, sc.SessionRow.id == sc.RunRow.session_id)
                       .filter(sc.SessionRow.title == t).count() for t in ("c0", "c1", "c2")}
        assert s.query(sc.ProjectRow).count() == 1 and s.query(sc.TaskRow).count() == 1
    assert per_session == {"c0": 10, "c1": 10, "c2": 10}


def test_a_session_emptied_earlier_in_the_transaction_is_made_again_for_a_later_trace(
        tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importer, "IMPORT_SLICE_S", 60.0)  # both traces in one transaction, however slow
    moved = agent_trace(service="moved", conversation="old", calls=1)
    import_files(store, [lines(tmp_path / "first.jsonl", moved)], helper=False)
    assert filed(store)[1] == {"old"}
    # In one import: the stored trace again, now naming conversation "new" (its run moves there and "old",
    # empty, is deleted), then a new trace in conversation "old". The second was asked about before the
    # first was written: then "old" existed.
    for span in moved:
        span._attributes = {**span.attributes, "gen_ai.conversation.id": "new"}  # type: ignore[attr-defined]
    later = agent_trace(service="moved", conversation="old", calls=1)  # the same project: the same session id
    result = import_files(store, [lines(tmp_path / "second.jsonl", moved, later)], helper=False)
    assert result.error is None
    runs, sessions = filed(store)
    assert sessions == {"new", "old"}
    assert {session for _, session in runs} == {"new", "old"} and len(runs) == 2
