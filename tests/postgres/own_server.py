"""A PostgreSQL server of a test module's own, to stop, start and restart (the session's server is shared)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentdesk.store.persistence.database import open_store
from tests.conftest import PgCluster


@dataclass
class OwnServer:
    bin_dir: Path
    root: Path
    url: str

    def stop(self) -> None:
        from tests.postgres import server
        server.pg_ctl(self.bin_dir, self.root, "stop")

    def start(self) -> None:
        from tests.postgres import server
        server.pg_ctl(self.bin_dir, self.root, "start")

    def restart(self) -> None:
        from tests.postgres import server
        server.pg_ctl(self.bin_dir, self.root, "restart")


@pytest.fixture(scope="module", name="own_server")
def own_server_fixture(pg_cluster: PgCluster) -> Iterator[OwnServer]:
    """A server of the importing module's own, stopped and restarted by its tests (import this fixture)."""
    from tests.postgres import server
    bin_dir = pg_cluster.bin_dir or server.find_bin_dir()
    if bin_dir is None:
        pytest.fail("the outage tests need PostgreSQL's binaries (pg_ctl) to run a server of their own")
    root, url = server.start(bin_dir)
    own = OwnServer(bin_dir, root, url)
    open_store(url).close()  # migrated once, here: each test's processes only open it
    try:
        yield own
    finally:
        server.stop(bin_dir, root)


