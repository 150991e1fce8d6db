"""Invariant: however a trace is cut into requests and in whatever order they arrive, the store ends the same."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdesk.store.ingest.spans import run_row_id
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import open_store
from agentdesk.store.server.receiver import ReceiverConfig, ReceiverThread
from tests.conftest import prebuilt
from tests.store.server.conftest import document, post, span_json

TRACE = "7e" * 16
# root > a > (a1, a2), root > b > b1: six spans, parents listed before children
TREE = [("root", None), ("a", "root"), ("a1", "a"), ("a2", "a"), ("b", "root"), ("b1", "b")]
IDS = {name: f"{n + 1:016x}" for n, (name, _) in enumerate(TREE)}


def spans() -> list[dict[str, Any]]:
    return [span_json(TRACE, IDS[name], IDS[parent] if parent else None, name=name) for name, parent in TREE]


def shape(path: Path, batches: list[list[dict[str, Any]]]) -> list[tuple[str, str | None, str]]:
    """Send the batches through a receiver into a fresh store; return (name, parent name, kind) per span."""
    store = open_store(str(prebuilt(path)))
    receiver = ReceiverThread(store, ReceiverConfig(port=0))
    host, port = receiver.start()
    try:
        for batch in batches:
            assert post(f"http://{host}:{port}/v1/traces", json.dumps(document(*batch)).encode()).status == 200
        assert receiver.wait_stored()  # a 200 is durable in the spool; the tree is read once it is stored
        table = NativeSource(store).span_table(run_row_id(TRACE))
        names = dict(zip(table.ids, table.names, strict=True))
        return sorted((names[i], names.get(p) if p else None, k)
                      for i, p, k in zip(table.ids, table.parent_ids, table.kinds, strict=True))
    finally:
        receiver.stop()
        store.close()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.permutations(range(len(TREE))), st.lists(st.integers(1, 3), min_size=1, max_size=6))
def test_any_split_and_order_gives_the_same_tree(order: list[int], sizes: list[int]) -> None:
    shuffled = [spans()[n] for n in order]
    batches, start = [], 0
    for size in sizes * len(TREE):
        if start >= len(shuffled):
            break
        batches.append(shuffled[start:start + size])
        start += size
    with tempfile.TemporaryDirectory() as folder:
        expected = shape(Path(folder) / "whole.sqlite", [spans()])
        assert shape(Path(folder) / "split.sqlite", batches) == expected
    assert {(name, parent) for name, parent, _ in expected} == set(TREE)  # and that tree is the real one
