"""The typed registry of sources: which runtimes agentdesk reads, how each is recognised and opened.

Every entry is checked by mypy: `open` must build something that satisfies the
`Source` protocol from the arguments `open_source` passes. Order matters: the
first runtime whose `recognise` answers wins (agentdesk's own tables first,
then the runtimes whose table sets are the most specific).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agentdesk.store.native import NativeSource
from agentdesk.store.source import Source
from agentdesk.store.sources import lensagent, maka, stageflow, vgxness
from agentdesk.store.sources.schema import Schema

AGENTDESK_TABLES = frozenset({"agentdesk_meta", "change_log", "audit_log"})


class Opener(Protocol):
    def __call__(self, path: Path, *, version: str | None, allow_writes: bool,
                 busy_timeout_s: float) -> Source: ...


@dataclass(frozen=True, slots=True)
class Runtime:
    kind: str
    recognise: Callable[[Schema], str | None]
    """The schema version this runtime's source reads ("" when unversioned), None when it is not this
    runtime's; raises `StoreUnavailable` for this runtime's schema at a version agentdesk cannot read."""
    open: Opener


def _recognise_agentdesk(schema: Schema) -> str | None:
    return "" if schema.tables & AGENTDESK_TABLES else None


def _open_agentdesk(path: Path, *, version: str | None, allow_writes: bool, busy_timeout_s: float) -> Source:
    return NativeSource.open(str(path), busy_timeout_s=busy_timeout_s)


RUNTIMES: tuple[Runtime, ...] = (
    Runtime("agentdesk", _recognise_agentdesk, _open_agentdesk),
    Runtime("maka", maka.recognise, maka.MakaSource),
    Runtime("stageflow", stageflow.recognise, stageflow.StageflowSource),
    Runtime("vgxness", vgxness.recognise, vgxness.VgxnessSource),
    Runtime("lensagent", lensagent.recognise, lensagent.LensagentSource),
)
NATIVE = RUNTIMES[0]


def runtime(kind: str) -> Runtime:
    """The registry entry for `kind` (KeyError for a kind agentdesk does not read)."""
    for entry in RUNTIMES:
        if entry.kind == kind:
            return entry
    raise KeyError(kind)
