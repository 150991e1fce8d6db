"""Which store holds rules: only agentdesk's own (other runtimes' databases have no rules table)."""

from __future__ import annotations

from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.source import Source


def rules_store(source: Source) -> Store | None:
    """The store to read rules from (and dry-run against), or None when the source has no rules."""
    return source.store if isinstance(source, NativeSource) else None


def why_no_rules(source: Source) -> str:
    """Why rules cannot be *changed* here ("" when they can), for disabled buttons and the banner."""
    if not isinstance(source, NativeSource):
        return f"Standing rules live in agentdesk stores; this is a {source.descriptor.kind} database."
    return "The store is open read-only: rules cannot be changed." if source.store.read_only else ""
