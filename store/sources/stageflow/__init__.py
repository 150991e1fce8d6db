"""stageflow's own SQLite database, opened in place as an agentdesk source.

See `docs/sources.md (stageflow)` for what maps to what; `common.py` for the tree levels.
"""

from __future__ import annotations

from agentdesk.store.sources.stageflow.approvals import ApprovalMixin
from agentdesk.store.sources.stageflow.spans import SpanMixin
from agentdesk.store.sources.stageflow.tree import TreeMixin
from agentdesk.store.sources.stageflow.watch import WatchMixin


class StageflowSource(WatchMixin, TreeMixin, SpanMixin, ApprovalMixin):
    """Reads, live changes and approval decisions on a stageflow `AgentStore` database."""


SOURCE = StageflowSource

__all__ = ["SOURCE", "StageflowSource"]
