"""The frozen values notes and labels are read as: what every view, the CLI and the export hand on."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime


@dataclass(frozen=True, slots=True)
class Target:
    """What a note or label sits on: a span, a run or an approval, and the run it belongs to."""

    kind: str
    id: str
    run_id: str

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.id}"


@dataclass(frozen=True, slots=True)
class Note:
    id: str
    target: Target
    text: str
    author: str
    author_login: str | None
    created_at: float
    updated_at: float
    updated_by: str
    revision: int


@dataclass(frozen=True, slots=True)
class Label:
    target: Target
    label: str
    author: str
    author_login: str | None
    created_at: float

    @property
    def id(self) -> str:
        """The change bus's and the audit's id of a label: `kind:target:label`."""
        return f"{self.target.key}:{self.label}"


@dataclass(frozen=True, slots=True)
class Marks:
    """Everything left on one target (or on many: a run's spans), notes oldest first, labels sorted."""

    notes: tuple[Note, ...] = ()
    labels: tuple[Label, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.notes and not self.labels

    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(sorted({label.label for label in self.labels}))


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of "everything noted or labelled since T": a note or a label, who wrote it and when."""

    what: str
    """note or label."""
    target: Target
    author: str
    author_login: str | None
    at: float
    text: str
    """The note's text, or the label."""
    note_id: str | None = None
    labels: tuple[str, ...] = field(default=())
    """Every label on the target now (so a note's line says how it is labelled)."""


def utc_text(at: float | None) -> str:
    """A note's or label's time as the sentences and the CLI show it: UTC, to the second."""
    return "an unknown time" if at is None else datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
