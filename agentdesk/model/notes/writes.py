"""What the "Add note / label…" dialog asks for, as store writes on the runner (never on the GUI thread)."""

from __future__ import annotations

from dataclasses import dataclass

from agentdesk.store.notes import commands
from agentdesk.store.notes.marks import Target
from agentdesk.store.persistence.database import Store


@dataclass(frozen=True)
class MarkRequest:
    """A note to add (may be empty), labels to put on, labels to take off: one dialog's answer."""

    target: Target
    note: str
    add: tuple[str, ...]
    remove: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not (self.note.strip() or self.add or self.remove)


def apply(store: Store, request: MarkRequest, actor: str) -> str:
    """Each write is its own audited unit of work; the first refusal stops the rest and is raised."""
    t = request.target
    for label in request.remove:
        commands.remove_label(store, t.kind, t.id, label, actor)
    for label in request.add:
        commands.add_label(store, t.kind, t.id, label, actor)
    if request.note.strip():
        commands.add_note(store, t.kind, t.id, request.note, actor)
    done = [f"{len(request.add)} label{'s' if len(request.add) != 1 else ''} added"] if request.add else []
    done += [f"{len(request.remove)} removed"] if request.remove else []
    done += ["a note added"] if request.note.strip() else []
    return f"{t.kind.capitalize()} {t.id}: {', '.join(done)}."
