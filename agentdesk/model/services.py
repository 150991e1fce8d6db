"""The handful of objects every model needs, built once per window."""

from __future__ import annotations

from dataclasses import dataclass

from agentdesk.model.bridge import BusBridge
from agentdesk.model.runner import StoreRunner
from agentdesk.store.source import Source


@dataclass
class Services:
    source: Source
    runner: StoreRunner
    bridge: BusBridge
    actor: str = "operator"
    """The operator's name, recorded with every decision and edit."""

    @classmethod
    def create(cls, source: Source, actor: str = "operator", coalesce_ms: int = 30) -> Services:
        return cls(source, StoreRunner(), BusBridge(source.bus, coalesce_ms), actor)

    def close(self) -> None:
        self.bridge.close()
        self.runner.shutdown()
