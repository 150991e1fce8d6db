"""stageflow's own SQLite database, opened in place as an agentdesk source.

See `docs/sources.md (stageflow)` for what maps to what; `common.py` for the tree levels.
"""

from agentdesk.store.sources.stageflow.source import StageflowSource, recognise

__all__ = ["StageflowSource", "recognise"]
