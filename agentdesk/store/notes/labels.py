"""What a label and a note may be: checked once here, for the window, the CLI and the import alike.

A label is a short tag an operator filters by (`label:needs-review`), so it must read as exactly what it is:
no control, format or separator character but the plain space (a zero-width space or a bidi control would make
two labels look the same, or one look like another), no leading or trailing space, at most 64 characters.
The server (migration 0018_notes) refuses the worst of these again; this check is the stricter one.
"""

from __future__ import annotations

import unicodedata

from agentdesk.store.errors import InvalidInput

SUGGESTED = ("needs-review", "bad-tool-choice", "regression")
"""The labels the window offers as chips; anyone may add their own."""
MAX_LABEL_CHARS = 64
MAX_NOTE_BYTES = 1_000_000
"""A note over 1 MB is refused (issue 24): it is a remark for a person, not a place to paste a trace."""
TARGET_KINDS = ("span", "run", "approval")


def label_problem(label: str) -> str | None:
    """Why `label` cannot be a label (one sentence), or None when it can."""
    if not label:
        return "A label cannot be empty."
    if len(label) > MAX_LABEL_CHARS:
        return f"A label is at most {MAX_LABEL_CHARS} characters; this one has {len(label)}."
    if label != label.strip():
        return "A label cannot start or end with a space."
    for char in label:
        if char != " " and unicodedata.category(char)[0] in "CZ":
            name = unicodedata.name(char, "an unnamed character")
            return (f"The label holds U+{ord(char):04X} ({name}): a label may hold no control, format or "
                    "separator characters but the space.")
    return None


def check_label(label: str) -> str:
    """The label as stored, or `InvalidInput` with the reason."""
    problem = label_problem(label)
    if problem is not None:
        raise InvalidInput(problem)
    return label


def check_note(text: str) -> str:
    """The note as stored, or `InvalidInput`: over 1 MB, blank, or holding what no store keeps (NUL, a lone
    surrogate; PostgreSQL refuses both, so SQLite must too, or an export would not import everywhere)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_NOTE_BYTES:
        raise InvalidInput(f"The note is {size:,} bytes; the limit is {MAX_NOTE_BYTES:,} bytes.")
    if not text.strip():
        raise InvalidInput("A note needs some text.")
    if "\x00" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        raise InvalidInput("A note cannot hold a NUL character or a lone surrogate.")
    return text


def check_kind(kind: str) -> str:
    if kind not in TARGET_KINDS:
        raise InvalidInput(f"Notes and labels go on a span, a run or an approval, not {kind!r}.")
    return kind
