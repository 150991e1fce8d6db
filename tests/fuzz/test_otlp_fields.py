"""Hypothesis over every field of an OTLP/JSON span: the importer refuses, it never crashes.

The documented outcomes of `import_files` are a result (with `error` set to a
`BadRecord` naming the record when a document is unusable) or a `StoreError`.
Anything else is a bug. Data intact: a refused document publishes none of its
traces, the store keeps every earlier row, and the audit chain still verifies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from agentdesk.store.errors import StoreError
from agentdesk.store.ingest.decode import spans_from_json
from agentdesk.store.ingest.importer import import_files
from agentdesk.store.ingest.spans import BadRecord
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store, open_store

JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                      st.floats(allow_nan=False), st.text(max_size=30))
ANY_JSON = st.recursive(JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                          st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                        max_leaves=12)
HEX = st.text("0123456789abcdef", min_size=0, max_size=34)
ANY_VALUE: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.fixed_dictionaries({"stringValue": st.text(max_size=20)}),
              st.fixed_dictionaries({"intValue": st.one_of(st.integers(), st.text(max_size=22))}),
              st.fixed_dictionaries({"doubleValue": st.one_of(st.floats(), st.text(max_size=5))}),
              st.fixed_dictionaries({"boolValue": st.one_of(st.booleans(), ANY_JSON)}),
              st.fixed_dictionaries({"bytesValue": st.text(max_size=12)}),
              ANY_JSON),
    lambda inner: st.one_of(
        st.fixed_dictionaries({"arrayValue": st.fixed_dictionaries({"values": st.lists(inner, max_size=3)})}),
        st.fixed_dictionaries({"kvlistValue": st.fixed_dictionaries({"values": st.lists(
            st.fixed_dictionaries({"key": st.text(max_size=6), "value": inner}), max_size=3)})})),
    max_leaves=8)
ATTRIBUTES = st.one_of(ANY_JSON, st.lists(st.one_of(
    st.fixed_dictionaries({"key": st.one_of(st.sampled_from(["gen_ai.operation.name", "gen_ai.request.model",
                                                              "gen_ai.usage.input_tokens", "gen_ai.input.messages",
                                                              "gen_ai.agent.name", "service.name"]),
                                            st.text(max_size=10), ANY_JSON),
                           "value": ANY_VALUE}),
    ANY_JSON), max_size=5))
NANOS = st.integers(min_value=-(2**64), max_value=2**66)
TIME = st.one_of(NANOS.map(str), NANOS, st.text(max_size=25), ANY_JSON)


def maybe(valid: st.SearchStrategy[Any], *, p_valid: float = 0.7) -> st.SearchStrategy[Any]:
    """Mostly a valid value (so the fuzzer reaches deep into a span), sometimes anything at all."""
    return st.one_of(valid, valid, valid, ANY_JSON) if p_valid else ANY_JSON


SPAN = st.fixed_dictionaries({
    "traceId": maybe(st.just("5b8efff798038103d269b633813fc60c") | HEX),
    "spanId": maybe(st.just("eee19b7ec3c1b174") | HEX),
    "name": maybe(st.text(max_size=20)),
    "kind": maybe(st.integers(min_value=-2, max_value=8) | st.sampled_from(["SPAN_KIND_CLIENT", "CLIENT", "x"])),
    "startTimeUnixNano": maybe(st.just("1700000000000000000") | TIME),
}, optional={
    "parentSpanId": maybe(HEX),
    "endTimeUnixNano": maybe(st.just("1700000000500000000") | TIME),
    "attributes": ATTRIBUTES,
    "events": maybe(st.lists(st.fixed_dictionaries({}, optional={
        "timeUnixNano": TIME, "name": maybe(st.text(max_size=10)), "attributes": ATTRIBUTES}), max_size=2)),
    "links": maybe(st.lists(st.fixed_dictionaries({}, optional={
        "traceId": HEX, "spanId": HEX, "attributes": ATTRIBUTES}), max_size=2)),
    "status": maybe(st.fixed_dictionaries({}, optional={
        "code": st.one_of(st.integers(min_value=-1, max_value=4), st.text(max_size=12), ANY_JSON),
        "message": maybe(st.text(max_size=20))})),
})
DOCUMENT = st.fixed_dictionaries({"resourceSpans": maybe(st.lists(st.fixed_dictionaries({
    "resource": maybe(st.fixed_dictionaries({"attributes": ATTRIBUTES})),
    "scopeSpans": maybe(st.lists(st.fixed_dictionaries({
        "scope": maybe(st.fixed_dictionaries({}, optional={"name": maybe(st.text(max_size=10)),
                                                           "version": maybe(st.text(max_size=5))})),
        "spans": maybe(st.lists(SPAN, min_size=1, max_size=3))}), min_size=1, max_size=2)),
}), min_size=1, max_size=2))})


@given(DOCUMENT)
@settings(max_examples=400, deadline=None)
def test_decoding_any_document_refuses_or_succeeds(doc: dict[str, Any]) -> None:
    try:
        spans = spans_from_json(doc, "fuzz")
    except BadRecord as exc:
        assert str(exc)  # one sentence naming the record
        return
    for span in spans:
        assert len(span.trace_id) == 32 and len(span.span_id) == 16


def counts(store: Store) -> tuple[int, int]:
    with store.reading() as s:
        return (int(s.execute(select(func.count()).select_from(sc.SpanRow)).scalar_one()),
                int(s.execute(select(func.count()).select_from(sc.RunRow)).scalar_one()))


@pytest.fixture
def fuzz_store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One store per test (shared by its examples): its audit key lives in this test's config folder."""
    store = open_store(str(tmp_path_factory.mktemp("fuzz") / "fuzz.sqlite"))
    yield store
    store.close()


@given(doc=DOCUMENT)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_importing_any_document_keeps_the_store_whole(doc: dict[str, Any], fuzz_store: Store,
                                                      tmp_path: Path) -> None:
    source = tmp_path / "fuzz.json"
    source.write_text(json.dumps(doc))
    before = counts(fuzz_store)
    try:
        result = import_files(fuzz_store, [source])
    except StoreError:
        result = None  # documented: an unusable store or file, said in one sentence
    spans, runs = counts(fuzz_store)
    if result is None or result.error is not None:
        assert (spans, runs) == before, "a refused document left rows behind"
    else:
        assert spans - before[0] == result.report.spans_written
    assert NativeSource(fuzz_store).verify().ok


def deep_document(depth: int) -> str:
    """One span whose attribute nests `depth` arrayValues; written as text (json.dumps would recurse)."""
    value = '{"arrayValue":{"values":[' * depth + '{"stringValue":"bottom"}' + "]}}" * depth
    return ('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60d",'
            '"spanId":"eee19b7ec3c1b175","name":"deep","startTimeUnixNano":"1700000000000000000",'
            f'"attributes":[{{"key":"deep","value":{value}}}]}}]}}]}}]}}')


def test_deeply_nested_attribute_is_refused_or_kept_never_a_crash(fuzz_store: Store, tmp_path: Path) -> None:
    """50,000 levels of arrayValue in one attribute (the issue's deep-nesting case)."""
    source = tmp_path / "deep.json"
    source.write_text(deep_document(50_000))
    before = counts(fuzz_store)
    try:
        result = import_files(fuzz_store, [source])
    except StoreError:
        return
    if result.error is not None:
        assert counts(fuzz_store) == before
    assert NativeSource(fuzz_store).verify().ok
