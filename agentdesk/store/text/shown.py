"""One line of agent text as a person reads it: `visible`, with runs counted.

A run of one whitespace character (100,000 spaces) or of one hidden character
(60 x U+2028) would push what follows it out of sight; here it becomes one
counted mark (`⟨100,000 spaces⟩`, `⟨60 x U+2028⟩` with a multiplication sign), so the `; rm -rf ~` after it
stays in view. Runs are found in the raw text and only the text between them goes
through `visible`, so nothing agent-supplied can forge a counted mark.
"""

from __future__ import annotations

import re

from agentdesk.store.text.visible import plural, visible

RUN = re.compile("([ \t\u3000\u00a0])\\1{15,}")
RUN_NAMES = {" ": "space", "\t": "tab", "\u3000": "ideographic space", "\u00a0": "no-break space"}
TIMES = "\u00d7"


def _run_mark(run: str) -> str:
    return f"⟨{plural(len(run), RUN_NAMES[run[0]])}⟩"


def shown(text: str, *, lines: bool = False) -> str:
    """`visible`, with long runs of one whitespace character, or of one hidden character, counted."""
    out: list[str] = []
    end = 0
    runs = RUN.finditer(text) if any(c * 16 in text for c in RUN_NAMES) else iter(())
    for match in runs:
        out += [visible(text[end:match.start()], lines=lines), _run_mark(match.group())]
        end = match.end()
    out.append(visible(text[end:], lines=lines))
    joined = "".join(out)
    return REPEATED_MARK.sub(_count_marks, joined) if "⟩⟨" in joined else joined


REPEATED_MARK = re.compile(r"(⟨(?:U\+[0-9A-F]{4,6}|[A-Z]{2,3})⟩)\1{3,}")


def _count_marks(match: re.Match[str]) -> str:
    one = match.group(1)
    return f"⟨{len(match.group()) // len(one)} {TIMES} {one[1:-1]}⟩"


def mark_start(text: str, pos: int) -> int:
    """`pos`, moved back to the start of a mark it would cut through."""
    opened = text.rfind("⟨", max(0, pos - 40), pos)
    return opened if opened >= 0 and "⟩" not in text[opened:pos] else pos


