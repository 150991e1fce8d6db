"""One approval as the read model shows it: what a decision returns and what the native reader lists.

Kept beside the commands (not in the native reader) so a decision can answer with the approval it wrote
without the approvals layer importing the reader that sits above it.
"""

from __future__ import annotations

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import NotFound
from agentdesk.store.persistence import convert
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store


def read_approval(store: Store, approval_id: str) -> rm.Approval:
    """The approval `approval_id`, fresh; `NotFound` if there is none."""
    with store.reading() as s:
        row = s.get(sc.ApprovalRow, approval_id)
        if row is None:
            raise NotFound(f"There is no approval with id {approval_id}.")
        agent = s.get(sc.AgentRow, row.agent_id)
        proj = s.get(sc.ProjectRow, row.project_id)
        return convert.approval(row, agent.name if agent else "", proj.name if proj else "")
