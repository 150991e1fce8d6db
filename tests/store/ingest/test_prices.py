"""Model calls with tokens and no reported cost get the price table's estimate, marked as one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from agentdesk.store.ingest import ingest_request
from agentdesk.store.ingest.export import export
from agentdesk.store.ingest.importer import import_files
from agentdesk.store.ingest.prices import ESTIMATED_KEY, estimate_cost, price_table
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.schema import SpanRow
from agentdesk.store.readmodel import Span
from tests.conftest import prebuilt
from tests.store.ingest.traces import agent_trace, request_of


def model_spans(store: Store) -> list[Span]:
    with store.reading() as session:
        ids = session.execute(select(SpanRow.id).where(SpanRow.kind == "model").order_by(SpanRow.id)).scalars()
        wanted = list(ids)
    source = NativeSource(store)
    return [span for span in (source.span(i) for i in wanted) if span is not None]


def test_the_table_prices_a_known_model_and_refuses_to_guess_an_unknown_one() -> None:
    known = estimate_cost("gpt-4o", "openai", 1_000_000, 0)
    assert known is not None and known > 0
    assert estimate_cost("gpt-4o", "openai", 1_000_000, 0, cache_read_tokens=1_000_000) < known  # type: ignore[operator]
    assert estimate_cost("gpt-4o", "an-unknown-provider", 1_000_000, 0) == known  # falls back to the model alone
    assert estimate_cost("no-such-model-anywhere", None, 1000, 1000) is None
    assert estimate_cost("gpt-4o", "openai", 0, 0) is None
    assert price_table().startswith("genai-prices ")


def test_tokens_without_a_cost_are_estimated_and_marked(store: Store) -> None:
    ingest_request(store, request_of(agent_trace(calls=2)))  # gpt-5 calls with tokens and no cost
    spans = model_spans(store)
    assert len(spans) >= 2
    for span in spans:
        a = span.attributes
        expected = estimate_cost(a["gen_ai.request.model"], a.get("gen_ai.provider.name"), span.usage.input_tokens,
                                 span.usage.output_tokens)
        if expected is None:  # "claude": the table knows no such model, so nothing is guessed
            assert span.usage.cost_usd == 0 and ESTIMATED_KEY not in a
        else:
            assert span.usage.cost_usd == pytest.approx(expected) and a[ESTIMATED_KEY] == price_table()
    assert sum(ESTIMATED_KEY in span.attributes for span in spans) == 2  # the two gpt-5 calls


def test_a_reported_cost_is_kept_as_it_is(store: Store) -> None:
    request = request_of(agent_trace(calls=1))
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                if span.name.startswith("chat"):
                    attribute = span.attributes.add()
                    attribute.key, attribute.value.double_value = "llm.cost.total", 0.5
    ingest_request(store, request)
    reported = [span for span in model_spans(store) if span.name.startswith("chat")]
    assert reported and all(span.usage.cost_usd == 0.5 and ESTIMATED_KEY not in span.attributes
                            for span in reported)


def test_an_estimate_is_not_exported_as_a_reported_cost_and_comes_back_the_same(tmp_path: Path, store: Store) -> None:
    ingest_request(store, request_of(agent_trace(calls=2)))
    before = sorted(s.usage.cost_usd for s in model_spans(store))
    out = tmp_path / "out.json"
    [project] = NativeSource(store).projects()
    with out.open("w") as f:
        export(store, f, project=project.id, fmt="otlp-json")
    text = out.read_text()
    assert ESTIMATED_KEY not in text and "agentdesk.cost_usd" not in text
    again = open_store(str(prebuilt(tmp_path / "again.sqlite")))
    try:
        import_files(again, [out])
        assert sorted(s.usage.cost_usd for s in model_spans(again)) == pytest.approx(before)
        assert sum(s.attributes.get(ESTIMATED_KEY) == price_table() for s in model_spans(again)) == 2
    finally:
        again.close()
    assert json.loads(text)  # a whole document
