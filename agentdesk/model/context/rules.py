"""Why a context command cannot be used right now, as one sentence for the operator.

The store enforces every rule itself; these answers exist so that a control can
be disabled beforehand and its tooltip can say why, instead of the operator
learning it from a refused write. `None` means the command can be tried.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt

from agentdesk.model.context.rows import LOCKED, VISIBLE
from agentdesk.model.context.tree import GroupRow, ItemRow, Row
from agentdesk.store import readmodel as rm
from agentdesk.store.source import Capability


class ContextState(Protocol):
    """What the rules read of `model.ContextModel` (a protocol, so this module does not import it)."""

    def cannot(self, capability: Capability) -> str | None: ...
    def group(self, group_id: str) -> GroupRow | None: ...
    def item(self, item_id: str) -> rm.ContextItem | None: ...
    def group_item_ids(self, group_id: str) -> list[str]: ...
    def live_item_ids(self) -> list[str]: ...
    def compaction(self, compaction_id: str | None) -> rm.Compaction | None: ...
    def row_value(self, index: QModelIndex | QPersistentModelIndex) -> Row | None: ...
    def index_of(self, kind: str, node_id: str, column: int = 0) -> QModelIndex: ...


def toggle_refusal(model: ContextState, value: Row | None, column: int) -> str | None:
    """For the Visible or Locked toggle of a row."""
    if column == VISIBLE:
        if isinstance(value, ItemRow) and value.covered:
            return "Replaced by the compaction summary above; undo the compaction to bring it back."
        group = model.group(value.group_id) if isinstance(value, ItemRow) else value
        return model.cannot(Capability.SET_VISIBILITY) or visibility_refusal(group)
    if column == LOCKED:
        if not isinstance(value, ItemRow) or value.covered:
            return "Only items in the context can be locked."
        return model.cannot(Capability.LOCK)
    return "Not a toggle."


def visibility_refusal(group: GroupRow | None) -> str | None:
    if group is None:
        return "This item's turn group is not loaded."
    if group.has_covered:
        return "Part of this turn group is inside a compaction; undo the compaction to change its visibility."
    if group.visible == Qt.CheckState.Checked and group.has_locked:
        return "This turn group holds a locked item; unlock it before hiding the group."
    return None


def edit_refusal(model: ContextState, value: Row | None) -> str | None:
    if why := model.cannot(Capability.EDIT_ITEM):
        return why
    if not isinstance(value, ItemRow):
        return "Select an item to edit its text."
    if value.covered:
        return "This item was replaced by a compaction; undo the compaction to edit it."
    if value.item.locked:
        return "This item is locked; unlock it (L) before editing."
    return None


def compact_refusal(model: ContextState, ids: Sequence[str]) -> str | None:
    """For the selected items (in context order): the store compacts only a consecutive, editable run."""
    if why := model.cannot(Capability.COMPACT):
        return why
    if not ids:
        return "Select consecutive visible, unlocked items to compact them into a summary."
    live = {item_id: n for n, item_id in enumerate(model.live_item_ids())}
    if any(i not in live for i in ids):
        return "The selection includes items a compaction already replaced."
    spots = [live[i] for i in ids]
    if spots != list(range(spots[0], spots[0] + len(spots))):
        return "Only consecutive items can be compacted; the selection has gaps."
    items = [model.item(i) for i in ids]
    if any(i is not None and not i.visible for i in items):
        return "Hidden items cannot be compacted; show them first or leave them out."
    if any(i is not None and i.locked for i in items):
        return "Locked items cannot be compacted; unlock them or leave them out."
    return None


def undo_plan(model: ContextState, value: Row | None) -> tuple[rm.Compaction | None, str | None]:
    """The compaction the current row stands for (its summary, or the group holding it), and any refusal."""
    if isinstance(value, GroupRow) and value.group.kind == "compaction":
        first = model.group_item_ids(value.group.id)[:1]
        value = model.row_value(model.index_of("item", first[0])) if first else None
    comp = model.compaction(value.item.summary_of) if isinstance(value, ItemRow) else None
    if why := model.cannot(Capability.UNDO_COMPACTION):
        return comp, why
    if comp is None:
        return None, "Select a compaction summary to bring back the items it replaced."
    if isinstance(value, ItemRow) and value.covered:
        return comp, "A later compaction replaced this summary; undo that one first."
    return comp, None
