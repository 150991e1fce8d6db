"""Agent text for Qt: every label, cell and tooltip goes through here, as plain text.

Qt guesses whether a label or tooltip string is HTML (`Qt.mightBeRichText`: a tag, or
`&lt;`, on the first line). Labels are fixed to `Qt.TextFormat.PlainText`, but a tooltip
cannot be: so `tooltip` returns the text itself whenever Qt cannot take it for HTML, and
otherwise the same text escaped inside a rich-text block that keeps its line breaks, so
what Qt displays is exactly the text, never an entity like `&#x27;` and never markup.
Either way the text has first gone through `visible`. Qt-free (the tree computes its
tooltips on the runner's threads); tests check it against Qt's own parser.
"""

from __future__ import annotations

import html

from agentdesk.store.text.shown import mark_start, shown
from agentdesk.store.text.visible import visible

TOOLTIP_CHARS = 3000
"""Tooltips show at most this much agent text: the panes have the rest."""


def shown_line(text: str | None, limit: int | None = None) -> str:
    """One line of agent text for a label or a cell: hidden characters marked (runs of one counted,
    `⟨60 x U+2028⟩`, so what follows stays in view), whitespace collapsed, cut without splitting a mark."""
    value = " ".join(shown(text or "", lines=True).split())  # marks first: str.split eats U+2028
    if limit is None or len(value) <= limit:
        return value
    return value[: mark_start(value, limit - 1)] + "…"


def shown_block(text: str | None) -> str:
    """Multi-line agent text for a plain-text editor: hidden characters marked, lines and tabs kept."""
    return visible(text or "", lines=True)


def might_be_rich(text: str) -> bool:
    """A conservative stand-in for `Qt.mightBeRichText`: any `<` or `&` on the first line."""
    first = text.split("\n", 1)[0]
    return "<" in first or "&" in first


def tooltip(*lines: str, limit: int = TOOLTIP_CHARS) -> str:
    """A tooltip of raw agent text that Qt shows literally: hidden characters marked, then `shown_tooltip`."""
    return shown_tooltip(*(visible(line, lines=True) for line in lines if line), limit=limit)


def shown_tooltip(*lines: str, limit: int = TOOLTIP_CHARS) -> str:
    """A tooltip of text already made visible (a cell's text, rendered arguments): never marked twice,
    escaped in a rich block only when Qt could take it for HTML."""
    body = "\n".join(line for line in lines if line)
    if len(body) > limit:
        body = body[: limit - 1] + "…"
    if not might_be_rich(body):
        return body
    return f"<qt><p style='white-space:pre-wrap'>{html.escape(body, quote=False)}</p></qt>"
