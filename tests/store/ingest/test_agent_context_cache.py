"""The mapped messages a receiver keeps per call: one entry a call, found again whatever the writer did to it.

A rebuild maps a call's messages from its stored attributes unless the cache has them. The writer adds keys to
those attributes while the call waits (the orphan marker, the agent it is filed under) and changes them when it
moves; the cache key leaves both out, so an orphan remembered before it is placed is found after.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentdesk.store.ingest import agent_context
from agentdesk.store.ingest.ingest import ingest_json
from agentdesk.store.ingest.prepare import AGENT_KEY, ORPHAN_KEY, add_keys
from agentdesk.store.persistence.database import open_store
from tests.conftest import prebuilt
from tests.store.ingest.test_correction import BOSS, WORKER, chat
from tests.store.ingest.test_one_decoder import spans_document

ATTRIBUTES = '{"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[]"}'


@pytest.mark.parametrize("attributes", [ATTRIBUTES, "{}"], ids=["with-attributes", "empty"])
def test_the_key_leaves_out_the_orphan_marker_and_the_agent(attributes: str) -> None:
    waiting = add_keys(attributes, {ORPHAN_KEY: "its parent span 05 has not arrived", AGENT_KEY: "oag_stand_in"})
    placed = add_keys(attributes, {AGENT_KEY: "oag_worker"})
    assert agent_context._key("s1", waiting) == agent_context._key("s1", placed) == agent_context._key(
        "s1", attributes)
    other = attributes.replace("[]", '[{"role": "user"}]') if attributes != "{}" else '{"x": 1}'
    assert agent_context._key("s1", add_keys(other, {AGENT_KEY: "oag_worker"})) != agent_context._key("s1", placed)
    assert agent_context._key("s2", placed) != agent_context._key("s1", placed)


def test_an_orphan_call_is_kept_once_and_found_after_it_is_placed(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_context, "_mapped", type(agent_context._mapped)())
    mapped_again: list[Any] = []
    real = agent_context.classify

    def counted(span: Any) -> Any:
        mapped_again.append(span)
        return real(span)

    monkeypatch.setattr(agent_context, "classify", counted)
    store = open_store(str(prebuilt(tmp_path / "received.sqlite")))
    try:
        ingest_json(store, spans_document([BOSS]))
        ingest_json(store, spans_document([chat(4, 5)]))  # its parent, the worker, has not arrived: an orphan
        assert len(agent_context._mapped) == 1  # one entry, not one with the orphan marker and one without
        ingest_json(store, spans_document([WORKER]))  # placed under the worker: the worker's context is built
    finally:
        store.close()
    assert mapped_again == []  # the rebuild found the call's messages in the cache
