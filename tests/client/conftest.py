"""A receiver with an agent token, for the tests that run a client-library agent in another process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentdesk.store.agents import tokens
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.server.receiver import ReceiverConfig, ReceiverThread
from tests.conftest import prebuilt


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[Store, str, str]]:
    """(the store, the agent API's URL, an agent token): the agent gets the URL and token, never the store."""
    store = open_store(str(prebuilt(tmp_path / "store.sqlite")), create=True)
    token = tokens.create(store, "remote-agent", "operator")[1]
    thread = ReceiverThread(store, ReceiverConfig(port=0, helper=False))
    host, port = thread.start()
    yield store, f"http://{host}:{port}", token
    thread.stop()
    store.close()
