"""lensagent values → agentdesk's vocabularies: times, statuses, usage, JSON text.

lensagent keeps timestamps as TEXT (ISO-8601 UTC such as `2026-11-30T09:00:00.000Z`, per the
reference [inferred]); its JSON columns hold shapes the seed does not show, so every parse
here is defensive and never raises on odd data: odd data is shown, not hidden.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from agentdesk.store import readmodel as rm

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NAIVE_EPOCH = datetime(1970, 1, 1)

RUN_STATUS = {"READY": "pending", "RUNNING": "running", "WAITING": "waiting"}
AGENT_STATUS = {"IDLE": "idle", "RUNNING": "running", "WAITING": "waiting", "STOPPED": "cancelled"}
OUTCOME_STATUS = {"success": "done", "failed": "failed", "cancelled": "cancelled", "interrupted": "failed"}
OUTCOME_SPAN = {"success": "ok", "failed": "error", "cancelled": "cancelled", "interrupted": "error"}
INPUT_KEYS = ("input_tokens", "prompt_tokens", "inputTokens", "promptTokens", "input")
OUTPUT_KEYS = ("output_tokens", "completion_tokens", "outputTokens", "completionTokens", "output")


def parse_time(value: object) -> datetime:
    """ISO TEXT (with `Z`, an offset, or naive = UTC) or Unix milliseconds; unreadable → the epoch."""
    if value is None or value == "":
        return EPOCH
    if isinstance(value, str) and value.endswith("Z"):  # lensagent's own form: the fast path
        try:
            return datetime.fromisoformat(value[:-1]).replace(tzinfo=UTC)
        except ValueError:
            return EPOCH
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value / 1000 if value > 10**11 else value, UTC)
    try:
        moment = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        return EPOCH
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse_time_opt(value: object) -> datetime | None:
    return None if value is None else parse_time(value)


def epoch(value: object) -> float:
    if isinstance(value, str) and value.endswith("Z"):  # the fast path, hot in a 100,000-span timeline
        try:
            return (datetime.fromisoformat(value[:-1]) - NAIVE_EPOCH).total_seconds()
        except ValueError:
            return 0.0
    return parse_time(value).timestamp()


def iso_now() -> str:
    """Now, in lensagent's own timestamp form (milliseconds, `Z`)."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


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
    return parse_time(updated_at) if state == "TERMINAL" else None


def json_value(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def json_dict(raw: str | None) -> dict[str, Any]:
    value = json_value(raw)
    return value if isinstance(value, dict) else {}


def json_text(raw: str | None) -> str | None:
    """A JSON column as an operator reads it: a JSON string as its text, anything else as JSON."""
    value = json_value(raw)
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def _count(usage: dict[str, Any], keys: tuple[str, ...]) -> int:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return max(0, int(value))
    return 0


def usage_of(raw: str | None) -> rm.Usage:
    """Tokens from `usage_json` (shape not in the seed: several spellings accepted); lensagent has no cost."""
    usage = json_dict(raw)
    return rm.Usage(_count(usage, INPUT_KEYS), _count(usage, OUTPUT_KEYS), 0.0)


def add(a: rm.Usage, b: rm.Usage) -> rm.Usage:
    return rm.Usage(a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens, 0.0)


def first_line(value: str, limit: int = 120) -> str:
    line = value.strip().splitlines()[0] if value.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"
