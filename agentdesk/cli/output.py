"""How the command line shows things: approvals, changes, ages, and untrusted text.

Kept apart from `cli` so the formats (which scripts parse: the JSON keys here are
a contract) live in one place, and so none of it needs Qt or a store.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from agentdesk.store.persistence.bus import Change, ChangeOp
from agentdesk.store.readmodel import Approval
from agentdesk.store.sim.control import SimEvent
from agentdesk.store.text.arguments import arguments_hash, byte_length, inspect_cached, short_hash
from agentdesk.store.text.jsonsafe import depth_of, loads
from agentdesk.store.text.times import UNREADABLE_TIME_TEXT, is_unreadable, readable_seconds
from agentdesk.store.text.visible import is_hidden, visible

RAW = False
"""`--raw`: print agent text byte for byte. The only way to; everything else goes through `visible`."""
JSON_DEPTH = 64
"""Arguments nested deeper than this are given as their (visible) text: printing them nested would recurse."""


def clean(text: object, width: int | None = None) -> str:
    """One terminal-safe line: escape sequences, controls, bidi, zero-width and tag characters shown as
    marks (`⟨ESC⟩[31m`, `⟨U+202E⟩`), whitespace collapsed; cut to `width` with an ellipsis."""
    value = str(text if text is not None else "")
    value = " ".join((value if RAW else visible(value, lines=True)).split())
    if width is not None and len(value) > width:
        return value[: max(0, width - 1)] + "…"
    return value


def safe_json(value: Any) -> Any:
    """The same value with every string (keys too) through `visible`, as the terminal shows it;
    unchanged with `--raw`. Iterative: no depth can make it recurse."""
    if RAW:
        return value
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        holder, key = stack.pop()
        node = holder[key]
        if isinstance(node, str):
            holder[key] = visible(node, lines=True)
        elif isinstance(node, dict):
            copy = {visible(k, lines=True): v for k, v in node.items()}
            holder[key] = copy
            stack.extend((copy, k) for k in copy)
        elif isinstance(node, list):
            copy_list = list(node)
            holder[key] = copy_list
            stack.extend((copy_list, n) for n in range(len(copy_list)))
    return root[0]


def json_text(value: Any, indent: int | None = None) -> str:
    """JSON for the terminal or a pipe: strings as `safe_json` makes them, non-ASCII kept readable."""
    return json.dumps(safe_json(value), ensure_ascii=False, indent=indent)


def iso(moment: datetime | None) -> str | None:
    """ISO-8601 UTC; None (JSON null) for a missing time and for a foreign time that could not be read."""
    if moment is None or is_unreadable(moment):
        return None
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


def iso_epoch(seconds: float) -> str | None:
    """ISO-8601 UTC of a Unix time; None (JSON null) for one no date can hold (a damaged row's ±1e300)."""
    readable = readable_seconds(seconds)
    return None if readable is None else datetime.fromtimestamp(readable, UTC).isoformat(timespec="milliseconds")


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
    """Arguments as JSON values when they parse and nest at most `JSON_DEPTH` levels, else as text."""
    if text is None:
        return None
    try:
        value = loads(text)
    except ValueError:
        return text
    return value if depth_of(value) <= JSON_DEPTH else text


def approval_json(approval: Approval, now: datetime) -> dict[str, Any]:
    """The stable JSON shape of one approval (scripts depend on these keys)."""
    return {
        "id": approval.id, "status": shown_status(approval, now), "tool": approval.tool_name,
        "arguments": parsed(approval.arguments), "agent_id": approval.agent_id, "agent": approval.agent_name,
        "project_id": approval.project_id, "project": approval.project_name, "run_id": approval.run_id,
        "span_id": approval.span_id, "created_at": iso(approval.created_at),
        "expires_at": iso(approval.expires_at), "decided_at": iso(approval.decided_at),
        "decided_by": approval.decided_by, "decided_login": approval.decided_login,
        "requested_login": approval.requested_login, "reason": approval.reason,
        "edited_arguments": parsed(approval.edited_arguments), "payload_hash": approval.payload_hash,
        "edited_hash": approval.edited_hash, "arguments_bytes": byte_length(approval.arguments),
        "arguments_hash": arguments_hash(approval.arguments),
        "hidden": inspect_cached(approval.arguments).sentence(),
    }


def approval_cells(approval: Approval, now: datetime) -> list[str]:
    status = shown_status(approval, now)
    expires = "-"
    if status == "pending" and approval.expires_at is not None:
        expires = span_of((approval.expires_at - now).total_seconds())
    elif status == "pending":
        expires = "never"
    warn = "⚠ " if inspect_cached(approval.arguments).suspicious else ""
    return [clean(approval.id), warn + clean(approval.tool_name, 24), clean(approval.agent_name, 24),
            clean(approval.project_name, 28),
            UNREADABLE_TIME_TEXT if is_unreadable(approval.created_at) else
            span_of((now - approval.created_at).total_seconds()), expires,
            status, clean(approval.decider or "-", 40), short_hash(arguments_hash(approval.arguments))]


APPROVAL_HEADERS = ["ID", "TOOL", "AGENT", "PROJECT", "AGE", "EXPIRES IN", "STATUS", "DECIDED BY", "ARGS HASH"]
"""A ⚠ before the tool: its arguments hide characters (see `--json`'s "hidden")."""


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[n]) for r in rows)) if rows else len(h) for n, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


def change_json(change: Change) -> str:
    return json_text({"seq": change.seq, "at": iso_epoch(change.at) if change.at else None,
                       "entity": change.entity, "op": change.op, "id": change.id,
                       "parents": dict(change.parents), "revision": change.revision, "origin": change.origin})


def change_line(change: Change) -> str:
    readable = readable_seconds(change.at) if change.at else None
    when = datetime.fromtimestamp(readable, UTC).strftime("%H:%M:%S.%f")[:-3] if readable is not None else "--:--:--"
    rev = f"rev={change.revision}" if change.revision is not None else ""
    parents = " ".join(f"{clean(k)}={clean(v)}" for k, v in change.parents.items())
    entity, op = clean(change.entity), clean(change.op)
    if change.op == ChangeOp.RESET:
        return (f"#{change.seq or '-':<6} {when}  reset: the change feed was interrupted (a gap or a reconnect), so "
                f"changes may have been missed here; read again what you rely on (`agentdesk approvals`, "
                f"`agentdesk info`).")
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


class _JsonEscapes(dict[int, "int | str"]):
    """A `str.translate` table: every hidden character (bidi, C1, DEL, zero-width, tag, U+2028/2029) as
    its JSON escape; line feeds stay (they are the document's own layout, never inside a JSON string)."""

    def __missing__(self, code: int) -> int | str:
        char = chr(code)
        value: int | str = code
        if char != "\n" and is_hidden(char):
            value = json.dumps(char)[1:-1]  # "\u202e", or a surrogate pair's two escapes
        if len(self) < 200_000:
            self[code] = value
        return value


_ESCAPES = _JsonEscapes()


class TerminalJson:
    """JSON text for a terminal: each hidden character written as its `\\uXXXX` escape, so the document
    still parses to the same value and nothing in it can steer the terminal (`--raw` writes it as is)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return int(self.stream.write(text.translate(_ESCAPES)))

    def flush(self) -> None:
        self.stream.flush()
