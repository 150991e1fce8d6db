"""`kill -9` of `agentdesk receive` with acknowledged spans not yet in the store: a restart stores each once.

A 200 now means the request is durable in the receiver's spool, not that it is
committed. The test holds the store's write lock from outside (another writer, as a
long import would), so the receiver keeps answering 200 from its spool while its
writer cannot commit; then it SIGKILLs the receiver, releases the lock, deletes the
dead receiver's drained checkpoint (so the replay also re-sends what was already
stored: idempotence, not the checkpoint, is what keeps it single) and starts a new
receiver. Every acknowledged span must then be in the store exactly once: the same
spans, agents, runs and context items as a store that ingested each request once.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from sqlalchemy import func, select

from agentdesk.store.ingest.ingest import ingest_payload
from agentdesk.store.ingest.receiver_decode import decode_prepared
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store, open_store
from tests.store.server.conftest import as_protobuf, document, post, span_json
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "free disk on db-3"}]}])


def body(n: int, *, protobuf: bool) -> tuple[bytes, str]:
    """Request n: a trace of an agent span, a model call with messages and a tool call."""
    trace = f"{n + 1:032x}"
    spans = [span_json(trace, f"{n + 1:08x}00000001", name="invoke_agent ops",
                       attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "ops"}),
             span_json(trace, f"{n + 1:08x}00000002", f"{n + 1:08x}00000001", name="chat",
                       attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                                   "gen_ai.input.messages": MESSAGES}),
             span_json(trace, f"{n + 1:08x}00000003", f"{n + 1:08x}00000001", name="execute_tool df",
                       attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "df"})]
    doc = document(*spans, service="kill9-receiver")
    if protobuf:
        return as_protobuf(doc), "application/x-protobuf"
    return json.dumps(doc).encode(), "application/json"


def start(store: Path, tmp: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "AGENTDESK_CONFIG_DIR": os.environ.get("AGENTDESK_CONFIG_DIR", str(tmp / "config"))}
    proc = subprocess.Popen([sys.executable, "-m", "agentdesk.cli", "--store", str(store), "receive", "--port", "0",
                             "--every", "3600"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("Receiving OTLP/HTTP on "):
            return proc, line.split()[3]
    proc.kill()
    raise AssertionError(f"the receiver did not start (exit {proc.wait()})")


def counts(store: Store) -> dict[str, int]:
    with store.reading() as s:
        return {table.__name__: int(s.execute(select(func.count()).select_from(table)).scalar_one())
                for table in (sc.SpanRow, sc.AgentRow, sc.RunRow, sc.ContextItemRow)}


def stored_ids(store: Store) -> list[str]:
    with store.reading() as s:
        return sorted(s.execute(select(sc.SpanRow.id)).scalars())


def reference(tmp: Path, bodies: list[tuple[bytes, str]]) -> Store:
    """The store each acknowledged request makes when written exactly once."""
    store = open_store(str(tmp / "reference.sqlite"))
    for raw, kind in bodies:
        payload, _ = decode_prepared(raw, kind, None, 1 << 24)
        ingest_payload(store, payload)
    return store


def test_acknowledged_spans_survive_a_kill_and_are_stored_once(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    proc, url = start(path, tmp_path)
    acknowledged: list[tuple[bytes, str]] = []
    lock: sqlite3.Connection | None = None
    try:
        for n in range(3):  # written and checkpointed before the lock
            raw, kind = body(n, protobuf=n % 2 == 1)
            assert post(url, raw, kind).status == 200
            acknowledged.append((raw, kind))
        store = open_store(str(path))
        eventually(lambda: len(stored_ids(store)) == 9, what="the first requests to be stored")
        store.close()
        lock = sqlite3.connect(path, isolation_level=None, timeout=30)
        lock.execute("BEGIN IMMEDIATE")  # another writer holds the store: the receiver's writer cannot commit
        for n in range(3, 9):
            raw, kind = body(n, protobuf=n % 2 == 1)
            assert post(url, raw, kind).status == 200  # durable in the spool, not in the store
            acknowledged.append((raw, kind))
        bad = post(url, b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}')
        assert bad.status == 400  # still validated before it is acknowledged
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        if lock is not None:
            lock.rollback()
            lock.close()
    spool = Path(f"{path}-spool")
    (dead,) = [p for p in spool.iterdir() if p.is_dir()]
    assert list(dead.glob("*.otlp")), "the killed receiver left its spool"
    (dead / "drained").unlink(missing_ok=True)  # replay from the start: stored requests come again
    store = open_store(str(path))
    assert len(stored_ids(store)) == 9  # only what was committed before the lock
    proc, url = start(path, tmp_path)
    try:
        expected = reference(tmp_path, acknowledged)
        want = stored_ids(expected)
        eventually(lambda: stored_ids(store) == want, what="every acknowledged span in the store")
        eventually(lambda: not dead.exists(), what="the replayed spool folder to be removed")
        assert counts(store) == counts(expected)  # nothing doubled: spans, agents, runs, context items
        expected.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        store.close()
    assert [p for p in spool.iterdir() if p.is_dir()] == []  # a clean stop leaves nothing to replay
