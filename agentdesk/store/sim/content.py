"""Deterministic, realistic-looking agent content from one `random.Random`.

The live simulator and the bulk populator share this so a demo store and a
benchmark store look alike. Every choice goes through the given Random and
nothing reads the clock, so the same seed always gives the same names, tools,
arguments and outputs (a test can rely on it; a bug report can quote a seed).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Any

from agentdesk.store.sim import vocabulary as v

RISKY_TOOLS = frozenset({"write_file", "run_shell", "send_email", "sql_query"})
"""Tools whose calls the simulated agents route through a human approval."""

TOOL_DURATIONS_S: dict[str, tuple[float, float]] = {
    "read_file": (0.1, 0.4), "write_file": (0.1, 0.5), "run_shell": (0.5, 2.0), "http_get": (0.3, 1.5),
    "search_code": (0.2, 0.8), "sql_query": (0.2, 1.2), "send_email": (0.3, 1.0), "web_search": (0.5, 2.0),
    "delegate": (1.0, 2.0),
}
TOOL_WEIGHTS = {"read_file": 6, "search_code": 4, "run_shell": 3, "write_file": 3, "http_get": 2,
                "web_search": 2, "sql_query": 2, "send_email": 1, "delegate": 1}


@dataclass(frozen=True, slots=True)
class AgentProfile:
    name: str
    role: str
    model: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    tool: str
    arguments: dict[str, Any]

    @property
    def risky(self) -> bool:
        return self.tool in RISKY_TOOLS

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int
    output_tokens: int
    cost_usd: float


class ContentGenerator:
    """Names, prompts, tool calls, outputs, durations and token counts, all from `rng`."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    # -- names -----------------------------------------------------------------------------
    def project_name(self) -> str:
        return f"{self.rng.choice(v.PROJECT_PREFIXES)} {self.rng.choice(v.PROJECT_SUFFIXES)}"

    def task_title(self) -> str:
        r = self.rng
        return r.choice(v.TASK_TEMPLATES).format(
            module=r.choice(v.MODULES), component=r.choice(v.COMPONENTS), tech=r.choice(v.TECHS),
            major=r.randint(1, 4), minor=r.randint(0, 12), issue=r.randint(100, 9999))

    def agent(self, role: str | None = None) -> AgentProfile:
        role = role or self.rng.choice(v.ROLES)
        return AgentProfile(f"{role}-{self.rng.choice(v.GIVEN_NAMES)}", role, self.rng.choice(list(v.MODELS)))

    def operator(self) -> str:
        return self.rng.choice(v.OPERATORS)

    def guardrail(self) -> str:
        return self.rng.choice(v.GUARDRAILS)

    # -- conversation ----------------------------------------------------------------------
    def user_prompt(self, task_title: str) -> str:
        return self.rng.choice(v.USER_PROMPTS).format(task=task_title[0].lower() + task_title[1:])

    def assistant_reply(self) -> str:
        text = self.rng.choice(v.ASSISTANT_REPLIES).format(file=self.rng.choice(v.FILES))
        if self.rng.random() < 0.15:
            text += "\n\n" + self.rng.choice(v.UNICODE_SNIPPETS)
        return text

    # -- tools -----------------------------------------------------------------------------
    def tool_call(self, *, allow_delegate: bool = True) -> ToolCall:
        names = [n for n in TOOL_WEIGHTS if allow_delegate or n != "delegate"]
        tool = self.rng.choices(names, weights=[TOOL_WEIGHTS[n] for n in names])[0]
        return ToolCall(tool, self.arguments(tool))

    def arguments(self, tool: str) -> dict[str, Any]:
        r = self.rng
        if tool == "read_file":
            start = r.randint(1, 400)
            return {"path": r.choice(v.FILES), "start_line": start, "end_line": start + r.randint(20, 200)}
        if tool == "write_file":
            return {"path": r.choice(v.FILES), "content": self._code_snippet(),
                    "create_dirs": r.random() < 0.3}
        if tool == "run_shell":
            return {"command": r.choice(v.SHELL_COMMANDS), "cwd": "/workspace/atlas",
                    "timeout_s": r.choice((60, 120, 600))}
        if tool == "http_get":
            return {"url": r.choice(v.URLS), "headers": {"Accept": r.choice(("application/json",
                                                                             "text/html"))}}
        if tool == "search_code":
            return {"query": r.choice(v.QUERIES), "path_glob": r.choice(("**/*.py", "src/**", "**/*.ts")),
                    "max_results": r.choice((10, 20, 50))}
        if tool == "sql_query":
            return {"database": r.choice(("analytics", "billing", "app_prod")), "query": r.choice(v.SQL),
                    "params": [r.randint(1, 99999)]}
        if tool == "send_email":
            return {"to": [r.choice(v.EMAILS)], "subject": f"Status update: {self.task_title()}",
                    "body": self.assistant_reply()}
        if tool == "web_search":
            return {"query": r.choice(v.SEARCHES), "num_results": r.choice((3, 5, 10))}
        if tool == "delegate":
            return {"role": r.choice(("researcher", "reviewer", "tester")), "task": self.task_title()}
        raise ValueError(f"unknown tool {tool}")

    def tool_output(self, call: ToolCall) -> str:
        r, tool = self.rng, call.tool
        if tool == "read_file":
            return self._code_snippet()
        if tool == "http_get":
            return r.choice(v.HTML_PAGES) if r.random() < 0.6 else json.dumps(
                {"title": "Crash in invoice.py", "state": "open", "comments": r.randint(0, 40),
                 "body": r.choice(v.UNICODE_SNIPPETS)}, ensure_ascii=False)
        if tool == "run_shell":
            if r.random() < 0.3:
                return v.ANSI_OUTPUT
            return f"{r.randint(5, 300)} passed in {r.uniform(0.5, 90):.2f}s"
        if tool == "search_code":
            query = call.arguments["query"]
            hits = [f"{r.choice(v.FILES)}:{r.randint(1, 900)}: {query}" for _ in range(r.randint(0, 6))]
            return "\n".join(hits) or "no matches"
        if tool == "sql_query":
            rows = [{"customer_id": r.randint(1, 9999), "total": round(r.uniform(10, 9000), 2)}
                    for _ in range(r.randint(0, 5))]
            return json.dumps({"rows": rows, "row_count": len(rows)})
        if tool == "web_search":
            return "\n".join(f"{n + 1}. {r.choice(v.URLS)} - {r.choice(v.UNICODE_SNIPPETS)}"
                             for n in range(3))
        if tool == "write_file":
            return f"wrote {r.randint(80, 9000)} bytes to {call.arguments['path']}"
        if tool == "send_email":
            return f"queued message <{r.getrandbits(48):012x}@mail.example.com>"
        return self.assistant_reply()

    def tool_error(self, call: ToolCall) -> str:
        text = self.rng.choice(v.TOOL_ERRORS.get(call.tool, ("tool failed",)))
        return text.format(path=call.arguments.get("path", "?"))

    def model_error(self) -> str:
        return self.rng.choice(v.MODEL_ERRORS)

    def run_failure(self) -> str:
        return self.rng.choice(v.RUN_FAILURES)

    def denial_reason(self) -> str:
        return self.rng.choice(v.DENIAL_REASONS)

    def _code_snippet(self) -> str:
        r = self.rng
        lines = [f"def compute_{r.choice(('tax', 'total', 'discount'))}(amount: Decimal) -> Decimal:",
                 f'    """Round half-even, as finance asked (ticket #{r.randint(100, 999)})."""',
                 f"    return (amount * Decimal('{r.uniform(0.01, 0.3):.3f}')).quantize(CENTS)"]
        if r.random() < 0.2:
            lines.append(f"# {r.choice(v.UNICODE_SNIPPETS)}")
        return "\n".join(lines)

    # -- timing and usage ------------------------------------------------------------------
    def model_duration(self) -> float:
        """0.5 to 3 s, skewed short like real completions."""
        return min(3.0, 0.5 + self.rng.lognormvariate(-0.3, 0.6))

    def tool_duration(self, tool: str) -> float:
        low, high = TOOL_DURATIONS_S.get(tool, (0.1, 2.0))
        return self.rng.uniform(low, high)

    def model_usage(self, model: str, context_tokens: int) -> Usage:
        price_in, price_out = v.MODELS.get(model, (1.0, 4.0))
        input_tokens = context_tokens + self.rng.randint(200, 1500)
        output_tokens = int(math.exp(self.rng.uniform(math.log(40), math.log(2500))))
        cost = (input_tokens * price_in + output_tokens * price_out) / 1_000_000
        return Usage(input_tokens, output_tokens, round(cost, 6))
