"""vgxness's own SQLite database, opened in place as an agentdesk source.

See `docs/sources.md (vgxness)` for what maps to what; `common.py` for the tree levels.
"""

from agentdesk.store.sources.vgxness.source import VgxnessSource, recognise

__all__ = ["VgxnessSource", "recognise"]
