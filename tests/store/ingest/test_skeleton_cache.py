"""The skeleton a receiving process keeps between writes of a trace is the stored one, or it is not used.

On both backends (`skeleton.of_row` mirrors each one's JSON extraction): after every write of a trace sent in
pieces, children first, the kept skeleton equals what `skeleton.load` reads back; a trace's later requests read
no skeleton; a write by another process (another `Store`), or a write rolled back, makes the next write read it
again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from agentdesk.store.ingest import skeleton
from agentdesk.store.ingest.decode import spans_from_json
from agentdesk.store.ingest.ingest import ingest_json
from agentdesk.store.ingest.prepare import prepare_all
from agentdesk.store.ingest.skeleton_cache import SkeletonCache, cache_of
from agentdesk.store.ingest.spans import run_row_id
from agentdesk.store.ingest.staged_writer import StagedTraceWriter
from agentdesk.store.ingest.trace_index import TraceIndex
from agentdesk.store.ingest.writer import write_trace
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.uow import UnitOfWork
from tests.store.ingest.test_retype_backends import TRACE, document, span

RUN = run_row_id(TRACE)
LOAD = skeleton.load
"""The stored skeleton, read back (not counted as the writer's)."""
AGENT = {"gen_ai.operation.name": "invoke_agent"}


def chat(n: int, parent: int) -> dict[str, Any]:
    return span(n, parent, "chat", {"gen_ai.operation.name": "chat", "gen_ai.request.model": f"m{n % 2}",
                                    "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
                                        {"type": "text", "content": f"q{n}"}]}])})


# A boss over two workers, each with two calls; the second worker's agent id is a number (JSON, not text).
SPANS = [chat(4, 3), chat(5, 3), span(3, 2, "invoke_agent w1", {**AGENT, "gen_ai.agent.name": "w1"}),
         chat(7, 6), chat(8, 6), span(6, 2, "invoke_agent w2", {**AGENT, "gen_ai.agent.name": "w2",
                                                                 "gen_ai.agent.id": 42}),
         span(9, 2, "execute_tool t", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}),
         span(2, 1, "invoke_agent boss", {**AGENT, "gen_ai.agent.name": "boss", "gen_ai.conversation.id": "c"}),
         span(1, None, "root", {})]
"""Children first, as a live exporter sends them (a span ends before its parent)."""


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The runs whose skeleton was read from the store."""
    read: list[str] = []

    def counted(conn: Any, run_id: str) -> list[skeleton.StoredSpan]:
        read.append(run_id)
        return LOAD(conn, run_id)

    monkeypatch.setattr(skeleton, "load", counted)
    yield read


def kept(store: Store) -> dict[str, skeleton.StoredSpan] | None:
    with store.reading() as s:
        revision = s.execute(select(sc.RunRow.revision).where(sc.RunRow.id == RUN)).scalar()
    return cache_of(store).get(RUN, revision)


def stored(store: Store) -> dict[str, skeleton.StoredSpan]:
    with store.reading() as s:
        return {st.span_id: st for st in LOAD(s.connection(), RUN)}


@pytest.mark.parametrize("batch", [1, 2])
def test_the_kept_skeleton_is_the_stored_one_and_later_requests_read_none(
        store: Store, loads: list[str], batch: int) -> None:
    for n in range(0, len(SPANS), batch):
        ingest_json(store, document(*SPANS[n:n + batch]))
        if n:  # the first write made the run: nothing kept yet
            assert kept(store) == stored(store)
    assert loads == [RUN]  # the second request read it; every later one used what was kept


def test_a_write_by_another_process_is_read_again(store: Store, store_path: Any, loads: list[str]) -> None:
    other = open_store(str(store_path))  # its own cache, as another process has
    try:
        ingest_json(store, document(*SPANS[:2]))
        ingest_json(store, document(*SPANS[2:4]))
        ingest_json(other, document(*SPANS[4:6]))
        assert loads == [RUN, RUN] and kept(store) is None  # what `store` kept is older than the stored trace
        ingest_json(store, document(*SPANS[6:]))
        assert loads == [RUN, RUN, RUN] and kept(store) == stored(store)
    finally:
        other.close()


def test_a_write_rolled_back_keeps_nothing(store: Store, loads: list[str]) -> None:
    ingest_json(store, document(*SPANS[:2]))
    ingest_json(store, document(*SPANS[2:4]))
    before = kept(store)
    assert before == stored(store)

    class Abandon(Exception):
        pass

    spans = prepare_all(spans_from_json(document(*SPANS[4:6]), "request"))
    index = TraceIndex(TRACE)
    for sp in spans:
        index.add(sp)
    with pytest.raises(Abandon), UnitOfWork(store) as uow:
        write_trace(uow, index, [spans], None)
        raise Abandon
    assert kept(store) == before == stored(store)  # still the stored one: the write that changed it is gone
    ingest_json(store, document(*SPANS[4:]))
    assert kept(store) == stored(store)


def test_a_staged_slice_makes_a_kept_skeleton_stale(store: Store) -> None:
    """An import writes a large trace over several transactions before its roll-up: each one bumps the run's
    revision, so a receiver never decides on a skeleton missing the slice's spans."""
    ingest_json(store, document(*SPANS[:2]))
    ingest_json(store, document(*SPANS[2:4]))
    assert kept(store) is not None
    spans = prepare_all(spans_from_json(document(*SPANS[4:6]), "request"))
    index = TraceIndex(TRACE)
    for sp in spans:
        index.add(sp)
    with UnitOfWork(store) as uow:
        writer = StagedTraceWriter(uow, index, None)
        writer.prepare()
        writer.write(spans)
    assert kept(store) is None


ids = st.text("abc", min_size=1, max_size=2)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(ids, st.integers(0, 5), st.integers(0, 1)), max_size=30), st.integers(1, 8))
def test_the_cache_holds_at_most_its_spans_and_answers_only_its_revision(
        ops: list[tuple[str, int, int]], limit: int) -> None:
    cache = SkeletonCache(max_spans=limit)
    latest: dict[str, tuple[int, int]] = {}
    for run_id, size, revision in ops:
        spans = {str(n): skeleton.StoredSpan(str(n), None, "chain", "s", n, None, None, "", None, None)
                 for n in range(size)}
        cache.keep(run_id, revision, spans)
        latest[run_id] = (revision, size)
        total = 0
        for known, (rev, _size) in latest.items():
            got = cache.get(known, rev)
            if got is not None:
                total += len(got)
                assert cache.get(known, rev + 1) is None
        assert total <= limit
    if ops:
        run_id, size, revision = ops[-1]
        got = cache.get(run_id, revision)
        assert (got is None) == (size > limit)
        if got is not None:
            got.clear()  # a copy: the writer changes it as it writes
            assert len(cache.get(run_id, revision) or {}) == size

