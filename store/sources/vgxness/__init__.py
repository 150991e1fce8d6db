"""vgxness's own SQLite database, opened in place as an agentdesk source.

See `docs/sources.md (vgxness)` for what maps to what; `common.py` for the tree levels.
"""

from __future__ import annotations

from agentdesk.store.sources.vgxness.approvals import ApprovalMixin
from agentdesk.store.sources.vgxness.spans import SpanMixin
from agentdesk.store.sources.vgxness.tree import TreeMixin
from agentdesk.store.sources.vgxness.watch import WatchMixin


class VgxnessSource(WatchMixin, TreeMixin, SpanMixin, ApprovalMixin):
    """Reads, live changes and approval resolutions on a vgxness memory database."""


SOURCE = VgxnessSource

__all__ = ["SOURCE", "VgxnessSource"]
