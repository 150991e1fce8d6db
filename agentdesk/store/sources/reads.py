"""A runtime's read side as plain functions, each taking the open read connection first.

`ForeignSource` answers every `SourceReader` call by opening one read transaction
and calling the runtime's function, so a runtime package writes queries and
mappings only, never the same delegating method again. A runtime whose functions
need more than the connection (lensagent's schema layout, maka's cached topology)
binds it with `bind` when the source opens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from agentdesk.store import readmodel as rm
from agentdesk.store.readmodel import Location, Page, SpanTable


@dataclass(frozen=True, slots=True)
class Reads:
    projects: Callable[[Connection], list[rm.Project]]
    tasks: Callable[[Connection, str], list[rm.Task]]
    sessions: Callable[[Connection, str], list[rm.Session]]
    agents: Callable[[Connection, str], list[rm.Agent]]
    runs: Callable[[Connection, str, int, int], Page[rm.Run]]
    run: Callable[[Connection, str], rm.Run]
    agent: Callable[[Connection, str], rm.Agent]
    locate: Callable[[Connection, str, str], Location]
    span_table: Callable[[Connection, str, Sequence[str] | None], SpanTable]
    span: Callable[[Connection, str], rm.Span]
    context: Callable[[Connection, str], rm.AgentContext]
    approvals: Callable[[Connection, str | None, int], list[rm.Approval]]
    approval: Callable[[Connection, str], rm.Approval]
    counts: Callable[[Connection], dict[str, int]]
    showcase_run: Callable[[Connection], str | None]
    sent_context: Callable[[Connection, str], list[rm.SentItem]]


def nothing_sent(conn: Connection, span_id: str) -> list[rm.SentItem]:
    """For runtimes that do not record what a model call was sent: nothing agentdesk could show."""
    return []


def bind(function: Callable[..., Any], lookup: Callable[[Connection], Any]) -> Callable[..., Any]:
    """`function(conn, lookup(conn), *args)` as a function of `(conn, *args)`."""
    def bound(conn: Connection, *args: Any) -> Any:
        return function(conn, lookup(conn), *args)
    return bound


def given(function: Callable[..., Any], value: Any) -> Callable[..., Any]:
    """`function(conn, value, *args)` as a function of `(conn, *args)` (a value fixed when the source opened)."""
    return bind(function, lambda conn: value)
