"""The names every feature's model shows agent text with (Qt-free, so store threads use them too).

Agent text is untrusted: `model.plain` makes hidden characters visible and hands tooltips to Qt
as plain text; these are the short names the tree, approvals and context models call.
"""

from __future__ import annotations

from agentdesk.model.plain import shown_line, tooltip


def escaped_tooltip(*lines: str) -> str:
    """Agent text for a tooltip, shown literally with hidden characters marked (see `model.plain.tooltip`)."""
    return tooltip(*lines)


def one_line(text: str, limit: int = 200) -> str:
    """Agent text for a cell: hidden characters marked, whitespace collapsed, cut to `limit`."""
    return shown_line(text, limit)


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"
