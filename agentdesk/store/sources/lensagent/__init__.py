"""lensagent (`@lensagent/core` 0.1.0 and 0.1.2) as an agentdesk source."""

from agentdesk.store.sources.lensagent.source import LensagentSource, recognise

__all__ = ["LensagentSource", "recognise"]
