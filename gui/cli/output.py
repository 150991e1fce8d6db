"""How the command line shows things: approvals, changes, ages, and untrusted text.

Kept apart from `cli` so the formats (which scripts parse: the JSON keys here are
a contract) live in one place, and so none of it needs Qt or a store.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from agentdesk.store.bus import Change
from agentdesk.store.readmodel import Approval
from agentdesk.store.sim.control import SimEvent

CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
"""C0/C1 controls (ANSI escapes start with one), zero-width and bidi overrides: agent text is untrusted."""


def clean(text: object, width: int | None = None) -> str:
    """One terminal-safe line: no escapes, no newlines, no bidi tricks; cut to `width` with an ellipsis."""
    value = CONTROL_CHARS.sub(" ", str(text if text is not None else ""))
    value = " ".join(value.split())
    if width is not None and len(value) > width:
        return value[: max(0, width - 1)] + "…"
    return value


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat(timespec="milliseconds")


def iso_epoch(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


def span_of(seconds: float) -> str:
    """A short human duration: 42s, 3m 07s, 2h 05m, 4d 3h."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86_400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86_400}d {s % 86_400 // 3600}h"


def shown_status(approval: Approval, now: datetime) -> str:
    """Pending past its deadline reads as expired, though nothing swept it yet (listing never writes)."""
    if approval.status == "pending" and approval.is_expired(now):
        return "expired"
    return approval.status


def parsed(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def approval_json(approval: Approval, now: datetime) -> dict[str, Any]:
    """The stable JSON shape of one approval (scripts depend on these keys)."""
    return {
        "id": approval.id, "status": shown_status(approval, now), "tool": approval.tool_name,
        "arguments": parsed(approval.arguments), "agent_id": approval.agent_id, "agent": approval.agent_name,
        "project_id": approval.project_id, "project": approval.project_name, "run_id": approval.run_id,
        "span_id": approval.span_id, "created_at": iso(approval.created_at),
        "expires_at": iso(approval.expires_at), "decided_at": iso(approval.decided_at),
        "decided_by": approval.decided_by, "reason": approval.reason,
        "edited_arguments": parsed(approval.edited_arguments), "payload_hash": approval.payload_hash,
        "edited_hash": approval.edited_hash,
    }


def approval_cells(approval: Approval, now: datetime) -> list[str]:
    status = shown_status(approval, now)
    expires = "-"
    if status == "pending" and approval.expires_at is not None:
        expires = span_of((approval.expires_at - now).total_seconds())
    elif status == "pending":
        expires = "never"
    return [clean(approval.id), clean(approval.tool_name, 24), clean(approval.agent_name, 24),
            clean(approval.project_name, 28), span_of((now - approval.created_at).total_seconds()), expires,
            status, clean(approval.decided_by or "-", 20)]


APPROVAL_HEADERS = ["ID", "TOOL", "AGENT", "PROJECT", "AGE", "EXPIRES IN", "STATUS", "DECIDED BY"]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[n]) for r in rows)) if rows else len(h) for n, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


def change_json(change: Change) -> str:
    return json.dumps({"seq": change.seq, "at": iso_epoch(change.at) if change.at else None,
                       "entity": change.entity, "op": change.op, "id": change.id,
                       "parents": dict(change.parents), "revision": change.revision, "origin": change.origin},
                      ensure_ascii=False)


def change_line(change: Change) -> str:
    when = datetime.fromtimestamp(change.at, UTC).strftime("%H:%M:%S.%f")[:-3] if change.at else "--:--:--"
    rev = f"rev={change.revision}" if change.revision is not None else ""
    parents = " ".join(f"{clean(k)}={clean(v)}" for k, v in change.parents.items())
    entity, op = clean(change.entity), clean(change.op)
    line = f"#{change.seq or '-':<6} {when}  {entity:<13} {op:<6} {clean(change.id)}"
    return f"{line}  {rev}  {parents}".rstrip()


def sim_event_line(event: SimEvent) -> str:
    when = datetime.fromtimestamp(event.at, UTC).strftime("%H:%M:%S")
    what = event.kind.replace("_", " ")
    parts = [when, f"{clean(event.agent, 22):<22}", f"{what:<18}"]
    if event.entity_id and event.kind.startswith("approval"):
        parts.append(event.entity_id)
    if event.tool:
        parts.append(clean(event.tool))
    if event.arguments:
        parts.append(clean(event.arguments, 70))
    if event.detail:
        parts.append(clean(event.detail, 70))
    return "  ".join(parts)
