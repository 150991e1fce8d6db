"""apache/maka's `runtime.sqlite` (runtime schema v11) as an agentdesk source."""

from agentdesk.store.sources.maka.source import MakaSource, recognise

__all__ = ["MakaSource", "recognise"]
