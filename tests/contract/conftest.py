"""Every contract test runs once per source: agentdesk's own store and the four foreign runtimes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentdesk.store.source import Source
from tests.contract.kinds import KINDS, Kind


@pytest.fixture(params=KINDS, ids=str)
def kind(request: pytest.FixtureRequest) -> Kind:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def built(kind: Kind, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / f"{kind.name}.db"
    return path, kind.build(path)


@pytest.fixture
def reader(kind: Kind, built: tuple[Path, dict[str, str]]) -> Iterator[Source]:
    """The database opened as the viewer opens a foreign file by default: read-only."""
    source = kind.open(built[0], writes=False)
    yield source
    source.close()


@pytest.fixture
def writer(kind: Kind, built: tuple[Path, dict[str, str]]) -> Iterator[Source]:
    """The same database opened with writes allowed (`--allow-writes` for a foreign one)."""
    source = kind.open(built[0], writes=True)
    yield source
    source.close()
