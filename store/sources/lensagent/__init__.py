"""lensagent (`@lensagent/core` 0.1.0 and 0.1.2) as an agentdesk source; `open_source` imports `SOURCE`."""

from agentdesk.store.sources.lensagent.source import LensagentSource

SOURCE = LensagentSource

__all__ = ["SOURCE", "LensagentSource"]
