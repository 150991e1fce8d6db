"""agentdesk's client library: what an agent process uses to be watched and gated by an operator.

    from agentdesk.client import AgentDesk

    # AGENTDESK_URL=http://127.0.0.1:4318 AGENTDESK_TOKEN=adt_... (`agentdesk agent-token create NAME`)
    with AgentDesk.connect() as desk:
        agent = desk.register(project="billing", agent="refunder", model="gpt-4.1")
        with agent.run("refund order 1042") as run:
            result = run.request_approval("issue_refund", {"order": 1042, "amount": 30})
            if result.approved:
                issue_refund(**result.arguments)   # the operator may have edited them

An agent is given the receiver's URL and an agent token, never the store (client/http.py);
`AgentDesk.connect(PATH)` opens a store directly for tests and simulations (client/local.py).
No Qt is imported (an import-linter contract keeps it so). Everything here is
stable: names and fields are only ever added. See docs/integrations.md.
"""

from agentdesk.client.desk import AgentDesk, otel_span_id, trace_run_id
from agentdesk.client.handles import Agent, Run, Span
from agentdesk.client.results import (
    ApprovalResult,
    Outcome,
    QuestionCancelled,
    QuestionExpired,
    QuestionNotAnswered,
)
from agentdesk.store.agents.context_view import ContextEntry, ModelContext
from agentdesk.store.messages.commands import Delivered

__all__ = ["Agent", "AgentDesk", "ApprovalResult", "ContextEntry", "Delivered", "ModelContext", "Outcome",
           "QuestionCancelled", "QuestionExpired", "QuestionNotAnswered", "Run", "Span", "otel_span_id",
           "trace_run_id"]
