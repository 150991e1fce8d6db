"""apache/maka's `runtime.sqlite` (runtime schema v11) as an agentdesk source.

`open_source` imports this package and uses `SOURCE`.
"""

from agentdesk.store.sources.maka.source import MakaSource

SOURCE = MakaSource

__all__ = ["SOURCE", "MakaSource"]
