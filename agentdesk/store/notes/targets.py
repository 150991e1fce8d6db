"""Which run a span, run or approval belongs to, and the change-log parents of a note on it.

Notes and labels carry their run (`run_id`) so the tree can mark a run and the export can find a run's notes
without joining three tables; these lookups are the SQLite path's (the server does the same in SQL).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentdesk.store.notes.labels import TARGET_KINDS
from agentdesk.store.persistence import schema as sc

RUN_OF = {"run": (sc.RunRow.id, sc.RunRow.id), "span": (sc.SpanRow.run_id, sc.SpanRow.id),
          "approval": (sc.ApprovalRow.run_id, sc.ApprovalRow.id)}


def target_run(session: Session, kind: str, target_id: str) -> str | None:
    """The run `kind target_id` belongs to, or None when there is no such target."""
    run_col, id_col = RUN_OF[kind]
    found = session.execute(select(run_col).where(id_col == target_id)).scalar()
    return None if found is None else str(found)


def find_target(session: Session, target_id: str) -> list[tuple[str, str]]:
    """Every (kind, run) an id names: a bare id on the command line may be a span's, a run's or an approval's."""
    found = []
    for kind in TARGET_KINDS:
        run = target_run(session, kind, target_id)
        if run is not None:
            found.append((kind, run))
    return found


def parents_of(session: Session, run_id: str, kind: str, target_id: str) -> dict[str, str]:
    """The run's place in the tree, and the target (`kind:id`): what a view needs to find the row to mark."""
    row = session.get(sc.RunRow, run_id)
    parents = {"run": run_id, "target": f"{kind}:{target_id}"}
    if row is not None:
        parents |= {"project": row.project_id, "task": row.task_id, "session": row.session_id,
                    "agent": row.agent_id}
    return parents
