"""Which sources have questions, and which can record an answer: asked, not assumed.

agentdesk's own store reads and answers its asks. A foreign runtime with questions of its own (lensagent
`user_input` waits, maka interaction requests) reads them; it answers only where the runtime's answer
format is known and writes are allowed. Callers ask `ask_reader(source)` / `ask_writer(source)`, like
`approval_writer` for decisions, instead of checking concrete classes.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from agentdesk.store.asks.reads import Ask
from agentdesk.store.errors import Unsupported


@runtime_checkable
class AskReader(Protocol):
    def asks(self, pending_only: bool = True, limit: int = 1000) -> list[Ask]:
        """Questions newest first (only pending ones, if asked)."""
        ...

    def ask(self, ask_id: str) -> Ask:
        """One question, fresh; `NotFound` if there is none."""
        ...


@runtime_checkable
class AskWriter(Protocol):
    def answer_ask(self, ask_id: str, answer: str, actor: str, *, expected_revision: int | None = None) -> Ask:
        """Answer a pending question exactly once; `AlreadyAnswered` / `AskExpired` name who or when otherwise."""
        ...


def ask_reader(source: object) -> AskReader | None:
    return source if isinstance(source, AskReader) else None


def ask_writer(source: object) -> AskWriter | None:
    return source if isinstance(source, AskWriter) else None


def require_ask_reader(source: object) -> AskReader:
    reader = ask_reader(source)
    if reader is None:
        raise Unsupported("This source has no questions: its runtime never asks a person for input.")
    return reader


def require_ask_writer(source: object, why_not: str | None = None) -> AskWriter:
    writer = ask_writer(source)
    if writer is None:
        raise Unsupported(why_not or "This source cannot record answers to questions.")
    return writer
