"""The project tree's context menu on a run: "Compare with…" (issue 10's run-to-run diff, from the tree).

Why a submenu of runs and not a dialog: the run an operator compares with is
almost always the previous run of the same agent, and the tree has already
loaded its neighbours (runs are listed newest first, so the previous run is the
next row down). Those are offered first, without a store read; "Any run…"
opens the diff window's own picker (its agent's runs, or any run id typed in).
The menu only reads the model's rows: nothing here waits on the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QModelIndex
from PySide6.QtWidgets import QMenu, QWidget

from agentdesk.model.plain import shown_line
from agentdesk.model.tree.model import INFO, NAME, EntityRole

OFFERED_RUNS = 8
"""Loaded runs of the same agent listed in the submenu (the previous one first); older ones via "Any run…"."""
ANY_RUN = "Any run…"


@dataclass(frozen=True)
class CompareChoice:
    run_id: str
    label: str


def sibling_runs(run: QModelIndex, limit: int = OFFERED_RUNS) -> list[CompareChoice]:
    """The other loaded runs of `run`'s agent, older ones first (the previous run leads), then newer ones.

    `run` is a model index (not a proxy's): its siblings are the agent's runs in the model's order,
    newest first, after the sub-agents.
    """
    model = run.model()
    agent = run.parent()
    rows = model.rowCount(agent)

    def choice(row: int) -> CompareChoice | None:
        index = model.index(row, NAME, agent)
        key = index.data(EntityRole)
        if not key or key[0] != "run":
            return None
        name = shown_line(str(index.data() or ""), 50)
        info = shown_line(str(model.index(row, INFO, agent).data() or ""), 40)
        return CompareChoice(str(key[1]), f"{name} · {info}" if info else name)

    order = [*range(run.row() + 1, rows), *range(run.row() - 1, -1, -1)]
    found: list[CompareChoice] = []
    for row in order:
        picked = choice(row)
        if picked is not None:
            found.append(picked)
            if len(found) >= limit:
                break
    return found


def run_menu(run: QModelIndex, compare: Callable[[str, str], None], parent: QWidget) -> QMenu:
    """The menu for a run row: "Compare with…" → the previous run, other loaded runs, any run.

    `compare(run_a, run_b)` is called with run_b "" when the operator wants to pick in the diff window.
    """
    run_id = str(run.data(EntityRole)[1])
    menu = QMenu(parent)
    sub = menu.addMenu("Compare with…")
    choices = sibling_runs(run)
    has_previous = run.row() + 1 < run.model().rowCount(run.parent())  # the next row down is older
    for number, choice in enumerate(choices):
        prefix = "Previous run: " if number == 0 and has_previous else ""
        action = sub.addAction(prefix + choice.label)
        action.setData(choice.run_id)
        action.triggered.connect(lambda _=False, b=choice.run_id: compare(run_id, b))
    if choices:
        sub.addSeparator()
    any_run = sub.addAction(ANY_RUN)
    any_run.setToolTip("Open the diff window and pick the run there (its agent's runs, or any run id)")
    any_run.triggered.connect(lambda _=False: compare(run_id, ""))
    return menu
