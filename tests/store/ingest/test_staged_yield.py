"""A large trace's staged import steps aside for an operator between pieces, on both backends.

SQLite's writer gate says when an operator waits; on PostgreSQL the lock table does
(`persistence/postgres/turn_waiters.py`). So on both the import's slices may be long (`STAGED_SLICE_S`: few
transactions) and still end after the piece in progress when someone waits. Before, PostgreSQL could not
tell, and cut its slices at 50 ms whoever waited."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from agentdesk.store.ingest import importer
from agentdesk.store.ingest.importer import import_files
from agentdesk.store.ingest.prepare import Prepared
from agentdesk.store.ingest.staged_writer import StagedTraceWriter
from agentdesk.store.persistence.database import Store
from agentdesk.store.persistence.postgres.turn_waiters import TurnWaiters
from agentdesk.store.uow import UnitOfWork
from tests.store.ingest.test_import_backends import otlp_file

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
SPANS = 2_500  # staged (> STAGED_SPANS), 13 pieces of STAGED_STEP


def pieces_per_transaction(store: Store, path: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    owners: list[UnitOfWork] = []  # each piece's unit of work, kept alive (no id is taken for another's)
    real_write = StagedTraceWriter.write

    def write(self: StagedTraceWriter, spans: Sequence[Prepared]) -> None:
        owners.append(self.uow)
        real_write(self, spans)

    monkeypatch.setattr(StagedTraceWriter, "write", write)
    result = import_files(store, [path], helper=False)
    assert result.report.spans_written == SPANS and result.error is None
    counts: list[int] = []
    for n, uow in enumerate(owners):
        if n and owners[n - 1] is uow:
            counts[-1] += 1
        else:
            counts.append(1)
    return counts


@pytest.mark.parametrize("waiting", [True, False], ids=["an operator waits", "nobody waits"])
def test_a_staged_import_ends_its_slice_after_the_piece_when_an_operator_waits(
        tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch, waiting: bool) -> None:
    monkeypatch.setattr(importer, "STAGED_SLICE_S", 3600.0)  # only a waiting operator ends a slice
    monkeypatch.setattr(importer, "OPERATOR_COURTESY_S", 0.0)
    monkeypatch.setattr(UnitOfWork, "operator_waiting", lambda self: waiting and self.signals_operators)
    monkeypatch.setattr(TurnWaiters, "waiting", lambda self: waiting)
    path = otlp_file(tmp_path / "big.jsonl", SPANS, SPANS)
    pieces = pieces_per_transaction(store, path, monkeypatch)
    assert pieces == ([1] * 13 if waiting else [13])
