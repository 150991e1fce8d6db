"""Opening any supported database as a `Source`: agentdesk's own, or a seed runtime's in place."""

from __future__ import annotations

from agentdesk.store.errors import InvalidInput, StoreUnavailable
from agentdesk.store.native import NativeSource
from agentdesk.store.paths import default_store_location
from agentdesk.store.persistence import sqlite
from agentdesk.store.persistence.database import to_url
from agentdesk.store.source import Source
from agentdesk.store.sources.detect import detect
from agentdesk.store.validation import require_regular_file


def open_source(location: str | None = None, *, allow_writes: bool = False, create: bool = False,
                read_only: bool = False, busy_timeout_s: float = 5.0, older_schema: bool = False) -> Source:
    """agentdesk stores open read-write (read-only with `read_only`: readers that must never write);
    other runtimes' databases read-only unless `allow_writes`. `older_schema`: an agentdesk store behind this
    version's schema is read as it is (`verify`) instead of refused with who upgrades it.

    Detection runs once, here: the registry entry that recognised the file opens it.
    """
    from agentdesk.store.sources.registry import runtime  # imports every runtime package

    if location is not None and "\x00" in location:  # resolve() and open() would raise ValueError on it
        raise InvalidInput(f"The store location {location!r} holds a NUL character, which no path or URL can hold.")
    url = to_url(location or default_store_location())
    path = sqlite.path_of(url)
    if path is not None:
        require_regular_file(path, "The store", StoreUnavailable)
    if path is None or not path.exists() or path.stat().st_size == 0:
        return NativeSource.open(location, create=create, read_only=read_only, busy_timeout_s=busy_timeout_s,
                                 older_schema=older_schema)
    found = detect(path, busy_timeout_s)
    if found.kind == "agentdesk":
        return NativeSource.open(location, create=create, read_only=read_only, busy_timeout_s=busy_timeout_s,
                                 older_schema=older_schema)
    return runtime(found.kind).open(path, version=found.version, allow_writes=allow_writes,
                                    busy_timeout_s=busy_timeout_s)
