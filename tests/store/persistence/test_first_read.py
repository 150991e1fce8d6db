"""Issue 21: the first read after opening a PostgreSQL store reuses the connection the open used (warm,
already checked), with the store's session settings; it used to pay a new connection, three settings'
transactions and a cold server process."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, text

from agentdesk.store.persistence.database import open_store
from tests.conftest import PgLocation


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_the_first_read_after_opening_opens_no_connection_and_has_the_settings(store_path: PgLocation) -> None:
    store = open_store(str(store_path), busy_timeout_s=2.5)
    try:
        opened: list[Any] = []
        event.listen(store.engine, "connect", lambda *_: opened.append(1))
        with store.reading() as session:
            zone = session.execute(text("SHOW TIME ZONE")).scalar_one()
            timeout = session.execute(text("SHOW lock_timeout")).scalar_one()
        assert opened == []
        assert zone == "UTC" and timeout == "2500ms"
        store.engine.dispose()  # a new connection gets them too
        with store.reading() as session:
            assert session.execute(text("SHOW lock_timeout")).scalar_one() == "2500ms"
            assert session.execute(text("SHOW TIME ZONE")).scalar_one() == "UTC"
        assert opened == [1]
    finally:
        store.close()
