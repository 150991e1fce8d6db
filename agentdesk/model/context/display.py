"""What each context row shows, role by role.

`data()` is hot, so everything here reads the row's plain values (previews were
computed once when the tree was built) and never the store. Agent text reaches
tooltips only through `model.plain.tooltip`, so Qt shows it literally.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont

from agentdesk.model.context.rows import KIND, LOCKED, PREVIEW, RIGHT, ROLE, TOKENS, VISIBLE
from agentdesk.model.context.tree import GROUP_LABELS, KIND_LABELS, GroupRow, ItemRow, Row, tooltip_text
from agentdesk.model.plain import tooltip
from agentdesk.model.text import plural
from agentdesk.store.text.times import shown_time

ItemIdRole = Qt.ItemDataRole.UserRole + 1
"""The item id (item rows) or group id (group rows)."""
NodeTypeRole = Qt.ItemDataRole.UserRole + 2
"""'group' or 'item'."""
AddedAfterRole = Qt.ItemDataRole.UserRole + 3
CoveredRole = Qt.ItemDataRole.UserRole + 4

KIND_COLOURS = {"message": "#5b8def", "tool_calls": "#e0a030", "result": "#2fa38b", "compaction": "#8e6bd8"}
OTHER_KIND = "#9aa5b1"
MUTED = QColor("#8b949e")
ADDED_AFTER = QColor(240, 160, 32, 70)
COVERED_ALPHA = 90

Display = Qt.ItemDataRole.DisplayRole
Refusal = Callable[[Row, int], str | None]


def _swatches(alpha: int) -> dict[str, QColor]:
    """Swatch colours by item kind ("" for any other kind), made once rather than per `data()` call."""
    swatches = {kind: QColor(colour) for kind, colour in (*KIND_COLOURS.items(), ("", OTHER_KIND))}
    for colour in swatches.values():
        colour.setAlpha(alpha)
    return swatches


def _check(on: bool) -> Qt.CheckState:
    return Qt.CheckState.Checked if on else Qt.CheckState.Unchecked


class RowDisplay:
    """Role values for item and group rows; `refusal` explains a toggle that cannot be used."""

    def __init__(self, refusal: Refusal) -> None:
        self._refusal = refusal
        self._bold = QFont()
        self._bold.setBold(True)
        self._italic = QFont()
        self._italic.setItalic(True)
        self._swatches = _swatches(255)
        self._faded = _swatches(COVERED_ALPHA)
        """A replaced item's swatch fades with its text: the model no longer sees it."""

    def data(self, row: Row, column: int, role: int, as_of: datetime | None) -> Any:
        found = self._item_data(row, column, role) if isinstance(row, ItemRow) else \
            self._group_data(row, column, role)
        return self._common(row, column, role, as_of) if found is None else found

    # -- item rows ----------------------------------------------------------------------------
    def _item_data(self, row: ItemRow, column: int, role: int) -> Any:
        item = row.item
        if role == Display:
            return _item_text(row, column)
        if role == Qt.ItemDataRole.CheckStateRole and not row.covered:
            return _check(item.visible) if column == VISIBLE else _check(item.locked) if column == LOCKED else None
        if role == Qt.ItemDataRole.DecorationRole and column == KIND:
            swatches = self._faded if row.covered else self._swatches
            return swatches.get(item.kind, swatches[""])
        if role == Qt.ItemDataRole.ForegroundRole and (row.covered or not item.visible):
            return MUTED
        if role == Qt.ItemDataRole.FontRole and row.covered:
            return self._italic
        return None

    # -- group rows ---------------------------------------------------------------------------
    def _group_data(self, row: GroupRow, column: int, role: int) -> Any:
        if role == Display:
            return _group_text(row, column)
        if role == Qt.ItemDataRole.CheckStateRole and column == VISIBLE:
            return row.visible
        if role == Qt.ItemDataRole.FontRole and column == KIND:
            return self._bold
        if role == Qt.ItemDataRole.ForegroundRole and row.visible == Qt.CheckState.Unchecked:
            return MUTED
        return None

    # -- both ---------------------------------------------------------------------------------
    def _common(self, row: Row, column: int, role: int, as_of: datetime | None) -> Any:
        if role == ItemIdRole:
            return row.key[1]
        if role == NodeTypeRole:
            return row.key[0]
        if role == AddedAfterRole:
            return row.added_after
        if role == CoveredRole:
            return isinstance(row, ItemRow) and row.covered
        if role == Qt.ItemDataRole.BackgroundRole and row.added_after:
            return ADDED_AFTER
        if role == Qt.ItemDataRole.TextAlignmentRole and column == TOKENS:
            return RIGHT
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(row, column, as_of)
        return None

    def _tooltip(self, row: Row, column: int, as_of: datetime | None) -> str | None:
        if column in (VISIBLE, LOCKED):
            hint = ("Shows or hides the whole turn group (Space)" if column == VISIBLE
                    else "A locked item cannot be edited, hidden or compacted (L)")
            return tooltip(self._refusal(row, column) or hint)
        notes = []
        if isinstance(row, ItemRow) and row.author:
            notes.append(f"A message from the operator {row.author}, delivered at the agent's model call.")
        if isinstance(row, ItemRow) and row.covered:
            notes.append("Replaced by the compaction summary above; the model does not see it.")
        if row.added_after and as_of is not None:
            notes.append(f"Added after {shown_time(as_of, '%Y-%m-%d %H:%M:%S')}.")
        body = tooltip_text(row.item.content) if isinstance(row, ItemRow) and column == PREVIEW else ""
        return tooltip(*notes, body) or None


def _item_text(row: ItemRow, column: int) -> str | None:
    item = row.item
    if column == KIND:
        label = KIND_LABELS.get(item.kind, item.kind)
        label = f"{label} of {row.replaces}" if row.replaces else label
        return f"{label} · later" if row.added_after else label
    if column == ROLE:
        return f"{item.role or 'user'} · {row.author}" if row.author else item.role or ""
    if column == PREVIEW:
        return f"replaced: {row.preview}" if row.covered else row.preview
    if column == TOKENS:
        return f"{item.token_estimate:,}"
    return None


def _group_text(row: GroupRow, column: int) -> str | None:
    group = row.group
    if column == KIND:
        label = GROUP_LABELS.get(group.kind, group.kind.capitalize())
        return "Compaction" if group.kind == "compaction" else f"{label} {group.ordinal}"
    if column == PREVIEW:
        count = plural(row.items, "item")
        return count if row.visible != Qt.CheckState.Unchecked else f"{count} · hidden from the model"
    if column == TOKENS:
        return f"{row.tokens:,}"
    return None
