"""Compressed span attributes on SQLite (store/persistence/payloads.py): every reader gets the text back,
old TEXT rows read as before, and PostgreSQL stores the text as it is."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select, text

from agentdesk.store.ingest import ingest_request
from agentdesk.store.ingest.export import export
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import payloads
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.convert import json_dict
from agentdesk.store.persistence.database import Store
from agentdesk.store.search.indexer import drain
from agentdesk.store.search.run_search import search_run
from tests.store.ingest.traces import agent_trace, request_of

HISTORY = json.dumps({"gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
    {"type": "text", "content": f"turn {n}: read src/mod_{n}.py"}]} for n in range(40)]),
    "gen_ai.operation.name": "chat", "needle.key": "zebra"})


@given(st.text(max_size=3000))
def test_pack_then_unpack_is_the_text(value: str) -> None:
    packed = payloads.pack(value)
    assert payloads.unpack(packed) == value
    assert isinstance(packed, str) or len(packed) < len(value.encode("utf-8", "surrogatepass"))


def test_large_repetitive_text_is_stored_as_a_marked_blob() -> None:
    packed = payloads.pack(HISTORY)
    assert isinstance(packed, bytes) and packed[0] == payloads.DEFLATE
    assert len(packed) < len(HISTORY) / 3
    assert payloads.pack("{}") == "{}"  # small values stay TEXT


def test_a_raw_insert_packs_only_the_packed_columns() -> None:
    rows = [("s1", HISTORY, HISTORY)]
    (packed,) = payloads.pack_rows("spans", ["id", "attributes", "input_text"], rows)
    assert packed[0] == "s1" and packed[2] == HISTORY and isinstance(packed[1], bytes)
    assert payloads.pack_rows("context_items", ["id", "attributes"], rows) is rows


def test_a_blob_with_an_unknown_marker_reads_as_lenient_text() -> None:
    assert payloads.unpack(b"\x07abc") == "\x07abc"
    assert payloads.unpack(b"\x01not deflate") == "\x01not deflate"


def _imported(store: Store) -> None:
    ingest_request(store, request_of(agent_trace(calls=12)))  # late calls carry a long history


def _run(store: Store) -> str:
    with store.engine.begin() as conn:
        return str(conn.execute(text("SELECT id FROM runs LIMIT 1")).scalar_one())


def test_imported_history_is_stored_compressed_and_every_reader_gets_the_text(store: Store) -> None:
    _imported(store)
    with store.engine.begin() as conn:
        raw = dict(conn.execute(text("SELECT id, attributes FROM spans")).all())
        kinds = dict(conn.execute(text("SELECT id, typeof(attributes) FROM spans")).all())
        in_sql = dict(conn.execute(text(f"SELECT id, json_extract({payloads.sql_text('attributes')}, "
                                        "'$.\"gen_ai.operation.name\"') FROM spans")).all())
    packed = [span for span, kind in kinds.items() if kind == "blob"]
    assert packed and len(packed) < len(kinds)  # the long histories only
    with store.reading() as s:
        orm = dict(s.execute(select(sc.SpanRow.id, sc.SpanRow.attributes)).all())
    for span in kinds:
        assert isinstance(orm[span], str)
        assert json_dict(raw[span]) == json.loads(orm[span])
        assert in_sql[span] == json.loads(orm[span]).get("gen_ai.operation.name")
    assert all(len(raw[span]) < len(orm[span].encode()) for span in packed)


def test_rows_written_as_text_before_compression_still_read(store: Store) -> None:
    _imported(store)
    with store.engine.begin() as conn:  # what a store written before this version holds: TEXT everywhere
        conn.execute(text(f"UPDATE spans SET attributes = {payloads.sql_text('attributes')}"))
        assert conn.execute(text("SELECT count(*) FROM spans WHERE typeof(attributes) = 'blob'")).scalar() == 0
    with store.reading() as s:
        assert all(json.loads(a) for a in s.execute(select(sc.SpanRow.attributes)).scalars())


def test_search_finds_an_attribute_in_compressed_rows_indexed_or_not(store: Store) -> None:
    _imported(store)
    source = NativeSource(store)
    run = _run(store)
    query = 'gen_ai.input.messages:"fix the build"'
    dirty = search_run(source, run, query).span_ids
    drain(store.engine)
    assert search_run(source, run, query).span_ids == dirty and len(dirty) == 12


def test_export_gives_back_the_attributes_as_imported(store: Store) -> None:
    spans = agent_trace(calls=12)
    ingest_request(store, request_of(spans))
    out = io.StringIO()
    export(store, out, run_id=_run(store))
    exported = {s["name"] + str(n): s for n, s in enumerate(
        s for line in out.getvalue().splitlines() for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"] for s in ss["spans"])}
    histories = sorted(a["value"]["stringValue"] for s in exported.values() for a in s["attributes"]
                       if a["key"] == "gen_ai.input.messages")
    assert histories == sorted(str(s.attributes["gen_ai.input.messages"]) for s in spans
                               if "gen_ai.input.messages" in (s.attributes or {}))


def test_the_details_pane_and_what_the_model_saw_read_compressed_spans(store: Store) -> None:
    _imported(store)
    source = NativeSource(store)
    with store.engine.begin() as conn:
        packed = [str(i) for i in conn.execute(text("SELECT id FROM spans WHERE typeof(attributes) = 'blob'"))
                  .scalars()]
    assert packed
    for span_id in packed:
        span = source.span(span_id)
        assert "Fix the build" in span.attributes["gen_ai.input.messages"]
        assert any("Fix the build" in item.content for item in source.sent_context(span_id))


@pytest.mark.postgres_only
def test_postgresql_stores_the_text_as_it_is(backend: str, store: Store) -> None:
    _imported(store)  # its server functions and word index read the column as text; TOAST compresses it
    with store.engine.begin() as conn:
        kinds = set(conn.execute(text("SELECT pg_typeof(attributes)::text FROM spans")).scalars())
        raw = dict(conn.execute(text("SELECT id, attributes FROM spans")).all())
    assert kinds == {"text"}
    assert all(json.loads(a) for a in raw.values())
    assert search_run(NativeSource(store), _run(store), 'gen_ai.input.messages:"fix the build"').span_ids


@given(st.dictionaries(st.text(max_size=20), st.text(max_size=400), max_size=12),
       st.dictionaries(st.text(max_size=20), st.text(max_size=60), max_size=3))
def test_a_text_deflated_ahead_and_finished_with_the_keys_added_reads_back_whole(
        attributes: dict[str, str], added: dict[str, str]) -> None:
    """The import's helper deflates a span's attributes but the closing brace (`pack_head`); the writer adds its
    keys (`add_keys`) and deflates only those (`Prepacked`): the stored value reads back as the whole text (stored
    as plain text where deflating would not make it smaller, as `pack` decides for any text)."""
    from agentdesk.store.ingest.messages import PLAIN
    from agentdesk.store.ingest.prepare import add_keys
    from agentdesk.store.persistence import deflate

    before = PLAIN.encode(attributes)
    after = add_keys(before, added) if added else before
    head = deflate.pack_head(before)
    if head is None:
        assert len(before) < deflate.THRESHOLD
        return
    stored = payloads.pack(deflate.prepacked(after, head, len(before) - 1))
    assert payloads.unpack(stored) == after
    if isinstance(stored, str):
        assert type(stored) is str  # not the subclass: nothing downstream keeps the deflated head


def test_a_long_repetitive_text_deflated_ahead_is_stored_compressed() -> None:
    from agentdesk.store.ingest.prepare import add_keys
    from agentdesk.store.persistence import deflate

    head = deflate.pack_head(HISTORY)
    assert head is not None
    after = add_keys(HISTORY, {"agentdesk.agent": "ag_1"})
    stored = payloads.pack(deflate.prepacked(after, head, len(HISTORY) - 1))
    assert isinstance(stored, bytes) and stored[0] == payloads.DEFLATE and len(stored) < len(after) // 2
    assert payloads.unpack(stored) == after
