"""What the client hands back: small frozen values, never ORM rows or store internals.

These types are the client's stable surface. Fields are only ever added, never
renamed or removed, so an agent written against them keeps working.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Outcome(StrEnum):
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    WITHDRAWN = "withdrawn"
    """The agent stopped waiting (a local timeout, a cancelled task) and took the request back."""


@dataclass(frozen=True, slots=True)
class ApprovalResult:
    """How a human gate ended, and what the agent may run.

    `arguments` are the ones to execute: the operator's edit when there was one
    (`edited` says so), else the arguments the agent asked with. On a denial or
    an expiry they are the original arguments, for logging only.
    """

    approval_id: str
    tool: str
    outcome: Outcome
    arguments: dict[str, Any]
    original_arguments: dict[str, Any]
    reason: str | None
    """The operator's reason (required for a denial, optional for an approval)."""
    decided_by: str | None
    """The operator's name; None when the deadline passed."""

    @property
    def approved(self) -> bool:
        return self.outcome is Outcome.APPROVED

    @property
    def denied(self) -> bool:
        return self.outcome is Outcome.DENIED

    @property
    def expired(self) -> bool:
        return self.outcome is Outcome.EXPIRED

    @property
    def withdrawn(self) -> bool:
        return self.outcome is Outcome.WITHDRAWN

    @property
    def edited(self) -> bool:
        return self.approved and self.arguments != self.original_arguments

    def describe(self) -> str:
        """One line for an agent's log or for the model ("the operator denied this: …")."""
        if self.approved:
            how = " with edited arguments" if self.edited else ""
            return f"{self.tool} approved by {self.decided_by}{how}."
        if self.denied:
            return f"{self.tool} denied by {self.decided_by}: {self.reason}"
        if self.withdrawn:
            return f"{self.tool} was withdrawn: the agent stopped waiting before anyone decided; it did not run."
        return f"{self.tool} was not decided before its deadline; it did not run."


def parse_arguments(text: str) -> dict[str, Any]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


class QuestionNotAnswered(Exception):
    """`run.ask` ended without an answer: the base of `QuestionExpired` and `QuestionCancelled`."""

    def __init__(self, ask_id: str, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.ask_id = ask_id
        self.reason = reason


class QuestionExpired(QuestionNotAnswered):
    """Nobody answered before `expires_in` passed."""


class QuestionCancelled(QuestionNotAnswered):
    """The question was taken back: by the agent (its `timeout`, an interruption) or by an operator."""
