"""A receiver that starts replays what a dead one left in its spool: traces and logs, the unreadable set aside."""

from __future__ import annotations

import json
from pathlib import Path

from agentdesk.store.ingest.receiver_spool import JSON, LOGS, TRACES, Record, Spool, read_records
from agentdesk.store.persistence.database import open_store
from agentdesk.store.server.receiver import ReceiverConfig, ReceiverThread
from tests.store.ingest.test_logs import assert_joined, logs_doc, spans_doc


def test_a_dead_receivers_spool_is_replayed_into_the_store_and_removed(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    dead = Spool(root)
    dead.open()
    unreadable = Record(TRACES, JSON, b'{"resourceSpans": "not a list"}')  # as if an older version took it
    dead.append([Record(LOGS, JSON, json.dumps(logs_doc()).encode()), unreadable,
                 Record(TRACES, JSON, json.dumps(spans_doc()).encode())])
    dead.close(remove=False)  # what a kill leaves: records, no lock
    store = open_store(str(tmp_path / "s.sqlite"))
    receiver = ReceiverThread(store, ReceiverConfig(port=0, helper=False, spool_dir=root))
    receiver.start()
    try:
        assert receiver.wait_stored(30)
        assert_joined(store)  # the span and the log records that came before it, joined
        assert not dead.folder.exists()
        assert [r for r, _ in read_records(root / "rejected.otlp")] == [unreadable]
    finally:
        receiver.stop()
        store.close()
    assert [p for p in root.iterdir() if p.is_dir()] == []
