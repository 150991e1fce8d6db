"""Plain-text helpers every feature's model shows agent text with (Qt-free, so store threads use them too).

Agent text is untrusted: it reaches Qt as plain text, and a tooltip (which Qt
would otherwise guess may be rich text) is escaped inside an explicit marker.
"""

from __future__ import annotations

import html


def escaped_tooltip(*lines: str) -> str:
    """Agent text for a tooltip: escaped, inside a rich-text marker so Qt never guesses the format."""
    body = "<br>".join(html.escape(line) for line in lines if line)
    return f"<qt>{body}</qt>"


def one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"
