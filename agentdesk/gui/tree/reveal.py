"""Revealing a tree row by id: ask the store where it sits, load each level on the way down, select it.

`locate` runs on the runner. The walk then resumes every time a load lands
(`step`, on the model's `children_loaded`): a missing level is loaded, and an
agent's runs are paged newest first until the run turns up or the search limit
is reached. A newer request supersedes a walk still in progress.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QModelIndex

from agentdesk.model.services import Services
from agentdesk.model.tasks import spawn
from agentdesk.model.tree.model import EntityRole, ProjectTreeModel
from agentdesk.store.persistence.bus import EntityKind
from agentdesk.store.readmodel import Location

Key = tuple[str, str]


@dataclass(frozen=True)
class _Walk:
    seq: int
    path: list[Key]
    page: int
    """Runs loaded per step while looking for a run."""
    max_runs: int
    """Older runs than this are not searched."""


class Revealer:
    def __init__(self, services: Services, model: ProjectTreeModel, *, expand: Callable[[QModelIndex], None],
                 select: Callable[[QModelIndex], None], message: Callable[[str], None]) -> None:
        self._services, self._model = services, model
        self._expand, self._select, self._message = expand, select, message
        self._walk: _Walk | None = None
        self._seq = 0

    def start(self, entity: str, entity_id: str, *, page: int, max_runs: int) -> None:
        self._seq += 1
        seq = self._seq
        spawn(self._locate(seq, entity, entity_id, page, max_runs), error_signal=self._services.runner.error)

    async def _locate(self, seq: int, entity: str, entity_id: str, page: int, max_runs: int) -> None:
        try:
            location = await self._services.runner.run(self._services.source.locate, EntityKind(entity), entity_id)
        except Exception as exc:
            self._failed(seq, f"Cannot show {entity} {entity_id}: {exc}")
            return
        self._located(seq, location, page, max_runs)

    def _located(self, seq: int, location: Location, page: int, max_runs: int) -> None:
        if seq != self._seq:
            return
        path = [("project", location.project_id)]
        levels = (("task", location.task_id), ("session", location.session_id))
        path += [(entity, value) for entity, value in levels if value]
        path += [("agent", agent_id) for agent_id in location.agent_ids]
        if location.run_id:
            path.append(("run", location.run_id))
        self._walk = _Walk(seq, path, page, max_runs)
        self.step()

    def _failed(self, seq: int, text: str) -> None:
        if seq == self._seq:
            self._walk = None
            self._message(text)

    def step(self) -> None:
        """Go down as far as the tree is loaded; load the next level, or select the target when there."""
        walk = self._walk
        if walk is None:
            return
        parent = QModelIndex()
        for entity, entity_id in walk.path:
            index = self._model.find(entity, entity_id)
            if not index.isValid():
                self._load_towards(walk, parent, entity, entity_id)
                return
            parent = index
        self._walk = None
        for entity, entity_id in walk.path[:-1]:
            self._expand(self._model.find(entity, entity_id))
        self._select(parent)
        self._message("")

    def _load_towards(self, walk: _Walk, parent: QModelIndex, entity: str, entity_id: str) -> None:
        if self._model.is_loading(parent):
            return  # children_loaded brings us back
        if entity == "run":
            shown, total = self._model.runs_shown(parent.data(EntityRole)[1])
            if shown >= walk.max_runs:
                self._failed(walk.seq, f"Run {entity_id} is older than the newest {shown:,} of "
                                       f"{total:,} runs of its agent; it is not shown in the tree.")
                return
        if not self._model.fetch_more(parent, walk.page if entity == "run" else None):
            self._failed(walk.seq, f"Could not find {entity} {entity_id} in the tree.")
