"""Does a tool call hide characters a person cannot see? An allow rule must never match it.

The classes of hidden characters (bidi controls, zero-width and other invisible
characters, Unicode tags, C0/C1 controls, line/paragraph separators…) are the
display function's (`agentdesk.store.text.visible.findings`), so "what the operator
is warned about" and "what a rule refuses to vouch for" are one definition. Line
feeds and tabs are not hidden here: a shell command's newlines are handled by the
parser, which makes every newline-separated command match on its own.
"""

from __future__ import annotations

from typing import Any

from agentdesk.store.text.visible import findings


def has_hidden_characters(text: str) -> bool:
    return bool(findings(text))


def value_hides_characters(value: Any) -> bool:
    """Any hidden character in any key or string of a decoded JSON value (escapes like \\u001b included)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if findings(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
