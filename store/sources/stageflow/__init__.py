"""stageflow's own SQLite database, opened in place as an agentdesk source.

See `docs/sources.md (stageflow)` for what maps to what; `common.py` for the tree levels.
"""

from __future__ import annotations

from .approvals import ApprovalMixin
from .spans import SpanMixin
from .tree import TreeMixin
from .watch import WatchMixin


class StageflowSource(WatchMixin, TreeMixin, SpanMixin, ApprovalMixin):
    """Reads, live changes and approval decisions on a stageflow `AgentStore` database."""


SOURCE = StageflowSource

__all__ = ["SOURCE", "StageflowSource"]
