"""Opening any supported database as a `Source`: agentdesk's own, or a seed runtime's in place."""

from __future__ import annotations

from pathlib import Path

from agentdesk.store import sqlite
from agentdesk.store.database import default_store_location, to_url
from agentdesk.store.native import NativeSource
from agentdesk.store.source import Source
from agentdesk.store.sources.detect import detect


def open_source(location: str | None = None, *, allow_writes: bool = False, create: bool = False,
                busy_timeout_s: float = 5.0) -> Source:
    """agentdesk stores open read-write; other runtimes' databases read-only unless `allow_writes`."""
    url = to_url(location or default_store_location())
    path = sqlite.path_of(url)
    if path is None or not path.exists() or path.stat().st_size == 0:
        return NativeSource.open(location, create=create, busy_timeout_s=busy_timeout_s)
    found = detect(path, busy_timeout_s)
    if found.kind == "agentdesk":
        return NativeSource.open(location, create=create, busy_timeout_s=busy_timeout_s)
    module = __import__(f"{__name__}.{found.kind}", fromlist=["SOURCE"])
    source_class = module.SOURCE
    return source_class(Path(path), version=found.version, allow_writes=allow_writes,  # type: ignore[no-any-return]
                        busy_timeout_s=busy_timeout_s)
