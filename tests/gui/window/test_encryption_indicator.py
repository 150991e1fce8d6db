"""The status bar says whether a PostgreSQL connection is encrypted; a SQLite store shows nothing there.

The shared test server has no TLS and is reached over its Unix socket, so "unencrypted (local socket)" is what
shows; the TLS wording is checked on the value the store answers (store/persistence/postgres/tls.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agentdesk.gui.window.status_bar import StoreStatusBar
from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.postgres.tls import Encryption
from tests.conftest import PgCluster
from tests.gui.conftest import World


@pytest.fixture
def pg_services(pg_cluster: PgCluster, qtbot: object) -> Iterator[Services]:
    url = pg_cluster.fresh_database()
    source = NativeSource.open(url)
    services = Services.create(source, actor="tester", coalesce_ms=10)
    yield services
    services.close()
    source.close()
    pg_cluster.drop(url)


def test_a_postgresql_window_says_its_connection_is_unencrypted(pg_services: Services, qtbot: Any) -> None:
    bar = StoreStatusBar(pg_services)
    qtbot.addWidget(bar)
    bar.show()
    qtbot.waitUntil(lambda: bar.encryption_label.isVisible())
    assert bar.encryption_label.text() == "unencrypted (local socket)"
    assert "Unix socket" in bar.encryption_label.toolTip()


def test_a_sqlite_window_shows_no_encryption(services: Services, world: World, qtbot: Any) -> None:
    bar = StoreStatusBar(services)
    qtbot.addWidget(bar)
    bar.show()
    qtbot.waitUntil(lambda: services.runner.in_flight == 0)
    assert not bar.encryption_label.isVisible()


def test_the_words_for_tls_and_for_a_network_connection_without_it() -> None:
    tls = Encryption(True, "TLSv1.3", "TLS_AES_256_GCM_SHA384")
    assert tls.label == "encrypted (TLS)" and "TLSv1.3, TLS_AES_256_GCM_SHA384" in tls.sentence
    plain = Encryption(False)
    assert plain.label == "unencrypted" and "sslmode=verify-full" in plain.sentence
