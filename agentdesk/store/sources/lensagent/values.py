"""lensagent values → agentdesk's vocabularies: times, statuses, usage, JSON text.

lensagent keeps timestamps as TEXT (ISO-8601 UTC such as `2026-11-30T09:00:00.000Z`, per the
reference [inferred]); its JSON columns hold shapes the seed does not show, so every parse
here is defensive and never raises on odd data: odd data is shown, not hidden.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agentdesk.store import readmodel as rm
from agentdesk.store.sources.parsing import json_object, time_of

RUN_STATUS = {"READY": "pending", "RUNNING": "running", "WAITING": "waiting"}
AGENT_STATUS = {"IDLE": "idle", "RUNNING": "running", "WAITING": "waiting", "STOPPED": "cancelled"}
OUTCOME_STATUS = {"success": "done", "failed": "failed", "cancelled": "cancelled", "interrupted": "failed"}
OUTCOME_SPAN = {"success": "ok", "failed": "error", "cancelled": "cancelled", "interrupted": "error"}
INPUT_KEYS = ("input_tokens", "prompt_tokens", "inputTokens", "promptTokens", "input")
OUTPUT_KEYS = ("output_tokens", "completion_tokens", "outputTokens", "completionTokens", "output")


def run_status(state: str | None, outcome: str | None) -> str:
    """READY→pending, RUNNING→running, WAITING→waiting, TERMINAL→by outcome (interrupted→failed)."""
    if state == "TERMINAL":
        return OUTCOME_STATUS.get(outcome or "", "done")
    return RUN_STATUS.get(state or "", "pending")


def agent_status(state: str | None) -> str:
    return AGENT_STATUS.get(state or "", "idle")


def span_status(state: str | None, outcome: str | None) -> str:
    if state != "TERMINAL":
        return "running"
    return OUTCOME_SPAN.get(outcome or "", "ok")


def ended(state: str | None, updated_at: object) -> datetime | None:
    """lensagent has no end time: `updated_at` marks the end only once the row is TERMINAL."""
    return time_of(updated_at) if state == "TERMINAL" else None


def _count(usage: dict[str, Any], keys: tuple[str, ...]) -> int:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return max(0, int(value))
    return 0


def usage_of(raw: str | None) -> rm.Usage:
    """Tokens from `usage_json` (shape not in the seed: several spellings accepted); lensagent has no cost."""
    usage = json_object(raw)
    return rm.Usage(_count(usage, INPUT_KEYS), _count(usage, OUTPUT_KEYS), 0.0)


def add(a: rm.Usage, b: rm.Usage) -> rm.Usage:
    return rm.Usage(a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens, 0.0)
