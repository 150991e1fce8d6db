"""Bus changes applied to the project tree as exact inserts, removals and per-row `dataChanged`.

A change names a row and its parents. Rows it touches that the tree shows (the
row itself, and the ancestors whose roll-up status and counts it moves) are
re-read in one call on the runner per batch; a new row is read only when its
parent's children are loaded, and waits for the load when one is in flight.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentdesk.model.services import Services
from agentdesk.model.tasks import Tickets
from agentdesk.model.tree.edits import TreeEdits
from agentdesk.model.tree.host import TreeHost
from agentdesk.model.tree.nodes import Node, NodeStore
from agentdesk.model.tree.reads import read_rows
from agentdesk.model.tree.rows import LEVELS, Key
from agentdesk.store.persistence.bus import RESET, Change, ChangeOp, EntityKind


class TreeChanges:
    def __init__(self, model: TreeHost, nodes: NodeStore, edits: TreeEdits, services: Services,
                 latest: Tickets) -> None:
        self._model, self._nodes, self._edits = model, nodes, edits
        self._source, self._runner, self._latest = services.source, services.runner, latest

    def apply(self, changes: Sequence[Change]) -> None:
        if any(c.op == RESET for c in changes):
            self._model.reload()
            return
        wanted: dict[Key, str] = {}
        for change in changes:
            self._plan(change, wanted)
        if wanted:
            self._latest.add(lambda ticket: self._refresh(wanted, ticket), on_error=self._failed)

    async def _refresh(self, wanted: dict[Key, str], ticket: int) -> None:
        self._read(await self._runner.run(read_rows, self._source, wanted), ticket)

    def _failed(self, exc: BaseException) -> None:
        self._model.report_failure(f"Could not refresh the tree: {exc}")

    def _plan(self, change: Change, wanted: dict[Key, str]) -> None:
        if change.entity in (EntityKind.APPROVAL, EntityKind.ASK):  # both count as pending for a person
            for level in LEVELS:
                if change.parents.get(level):
                    self._want(level, change.parents[level], change, wanted, subject=False)
            return
        if change.entity not in LEVELS:
            return
        if change.op == ChangeOp.DELETE:
            self._edits.remove((change.entity, change.id))
        else:
            self._want(change.entity, change.id, change, wanted, subject=True)
        for level in LEVELS[:LEVELS.index(change.entity)]:  # roll-up statuses and counts above it
            if change.parents.get(level):
                self._want(level, change.parents[level], change, wanted, subject=False)

    def _want(self, entity: str, entity_id: str, change: Change, wanted: dict[Key, str],
              subject: bool) -> None:
        node = self._nodes.find((entity, entity_id))
        if node is not None:
            wanted[(entity, entity_id)] = node.f.group
            return
        lister = self._lister(entity, change.parents)
        if lister is None:
            return
        if lister.loading:
            self._nodes.defer(lister, change)  # the load in flight may predate this change
        elif subject and lister.loaded:
            wanted[(entity, entity_id)] = lister.id

    def _lister(self, entity: str, parents: Mapping[str, str]) -> Node | None:
        group = "" if entity == "project" else parents.get(LEVELS[LEVELS.index(entity) - 1], "")
        return self._nodes.lister(entity, group)

    def _read(self, rows: list[tuple[Key, Node | None]], seq: int) -> None:
        for _key, fresh in rows:
            if fresh is not None and not self._edits.known(fresh, seq):
                self._edits.place(fresh, seq)
