"""The agentdesk gate as an agent framework's approval hook (`needs_approval` / tool-guard style).

Frameworks ask a callback before a tool runs: the OpenAI Agents SDK has
`needs_approval=` (a flag or a predicate) on a tool, others a "before tool call"
guard that may allow, rewrite or block the call. `AgentDeskGuard` is that
callback, backed by the operator's queue: it blocks (without blocking the event
loop) until someone approves, edits-and-approves or denies in the window or with
`agentdesk approve/deny`, and hands the framework the arguments to run with.

`MiniAgent` below is a stand-in for the framework so the example runs on its
own; the guard is the part to copy. Run it with the receiver's address and an agent token
(`agentdesk agent-token create refund-agent`, then `agentdesk receive`), then decide in another terminal:

    AGENTDESK_URL=http://127.0.0.1:4318 AGENTDESK_TOKEN=adt_... python examples/approval_hook.py
                                                  # waits on "refund" (amount over 100)
    agentdesk approvals
    agentdesk approve apr_... --actor you --args '{"order": "A-17", "amount": 80}'
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agentdesk.client import AgentDesk, Run

# -- the framework side (what a real SDK provides) ---------------------------------------------
NeedsApproval = bool | Callable[[dict[str, Any]], bool]


@dataclass
class Tool:
    name: str
    fn: Callable[..., Awaitable[Any]]
    needs_approval: NeedsApproval = False

    def requires_approval(self, arguments: dict[str, Any]) -> bool:
        return self.needs_approval(arguments) if callable(self.needs_approval) else self.needs_approval


@dataclass(frozen=True)
class GuardVerdict:
    allow: bool
    arguments: dict[str, Any]
    message: str = ""


Guard = Callable[[Tool, dict[str, Any]], Awaitable[GuardVerdict]]


@dataclass
class MiniAgent:
    """Runs a fixed plan of tool calls, asking its guard first for tools that need approval."""

    tools: dict[str, Tool]
    guard: Guard
    log: list[dict[str, Any]] = field(default_factory=list)

    async def run(self, plan: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        for name, arguments in plan:
            tool = self.tools[name]
            if tool.requires_approval(arguments):
                verdict = await self.guard(tool, arguments)
                if not verdict.allow:
                    self.log.append({"tool": name, "blocked": verdict.message})
                    continue
                arguments = verdict.arguments
            self.log.append({"tool": name, "arguments": arguments, "result": await tool.fn(**arguments)})
        return self.log


# -- the part to copy: the framework's hook, backed by agentdesk --------------------------------
class AgentDeskGuard:
    """A tool guard that asks agentdesk's operator; edited arguments replace the model's."""

    def __init__(self, run: Run, expires_in: float = 300.0) -> None:
        self.run = run
        self.expires_in = expires_in

    async def __call__(self, tool: Tool, arguments: dict[str, Any]) -> GuardVerdict:
        result = await self.run.arequest_approval(tool.name, arguments, expires_in=self.expires_in)
        return GuardVerdict(result.approved, result.arguments, result.describe())


# -- an agent using it -------------------------------------------------------------------------
async def lookup_order(order: str) -> dict[str, Any]:
    return {"order": order, "paid": 120}


async def refund(order: str, amount: float) -> str:
    return f"refunded {amount} on {order}"


TOOLS = {
    "lookup_order": Tool("lookup_order", lookup_order),
    "refund": Tool("refund", refund, needs_approval=lambda args: float(args.get("amount", 0)) > 100),
}
PLAN = [("lookup_order", {"order": "A-17"}), ("refund", {"order": "A-17", "amount": 120}),
        ("refund", {"order": "A-18", "amount": 20})]


async def main_async(store: str | None = None) -> list[dict[str, Any]]:
    """`store`: a URL (default $AGENTDESK_URL, with $AGENTDESK_TOKEN) or, in tests, a store path."""
    with AgentDesk.connect(store, actor="refund-agent") as desk:
        agent = desk.register(project="refund-agent", agent="refunder", model="scripted-model")
        with agent.run("refunds for today") as run:
            guard = AgentDeskGuard(run, expires_in=float(os.environ.get("APPROVAL_TIMEOUT", 300)))
            log = await MiniAgent(TOOLS, guard).run(PLAN)
        agent.finish("done")
    return log


def main() -> int:
    for entry in asyncio.run(main_async()):
        print(json.dumps(entry), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
