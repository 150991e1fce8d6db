"""The shape of the context tree, built from one snapshot with no Qt model involved.

A tree rather than a flat table with header rows, because compactions nest:

    Turn 1                      group row: Visible acts on the whole group
      message · user · "The settlement test …"
    Compaction                  the group a compaction created
      summary · system · "…"    the summary item; its children are the items it replaced,
        result · tool · …       greyed and without toggles (the model no longer sees them)

A group appears where its first uncovered item sits; a group whose items are all
covered appears only through the summary that replaced them (so its turn group
vanishes until the compaction is undone). Rows hold plain values: read-model
dataclasses plus previews computed once, never in `data()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from PySide6.QtCore import Qt

from agentdesk.store import readmodel as rm
from agentdesk.store.text.shown import shown

KIND_LABELS = {"message": "message", "tool_calls": "tool call", "result": "result", "compaction": "summary"}
GROUP_LABELS = {"turn": "Turn", "tool": "Tool turn", "message": "Operator message"}
PREVIEW_CHARS = 160


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """The first non-blank line, hidden characters marked, whitespace collapsed; never scans more than a
    few KB. Lines are split at line feeds only: U+2028 and friends are shown as marks, not breaks."""
    raw = text[: limit * 8]
    head = shown(raw, lines=True)
    first = next((line for line in head.split("\n") if line.strip()), "")
    flat = " ".join(first.split())
    more = len(flat) > limit or len(raw) < len(text) or "\n" in head.strip()
    return (flat[:limit].rstrip() + " …") if more else flat


def tooltip_text(text: str, limit: int = 600) -> str:
    """Agent text for a tooltip, cut to `limit` (the combining into one tooltip is `model.plain.tooltip`)."""
    return text[:limit] + (" …" if len(text) > limit else "")


@dataclass(frozen=True, slots=True)
class ItemRow:
    item: rm.ContextItem
    preview: str
    covered: bool
    added_after: bool
    replaces: int = 0
    """For a summary item: how many items it replaced."""
    author: str | None = None
    """The operator who wrote it, for a delivered operator's message (store/messages); None: the agent's own."""

    @property
    def key(self) -> tuple[str, str]:
        return ("item", self.item.id)

    @property
    def group_id(self) -> str:
        """The turn group whose Visible toggle this row acts on."""
        return self.item.group_id


@dataclass(frozen=True, slots=True)
class GroupRow:
    group: rm.ContextGroup
    items: int
    tokens: int
    """Of all its uncovered items; the model sees them only while the group is visible."""
    visible: Qt.CheckState
    has_covered: bool
    has_locked: bool
    added_after: bool

    @property
    def key(self) -> tuple[str, str]:
        return ("group", self.group.id)

    @property
    def group_id(self) -> str:
        return self.group.id


Row = ItemRow | GroupRow


@dataclass(eq=False)
class Node:
    key: tuple[str, str]
    value: ItemRow | GroupRow | None
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    row: int = 0

    def adopt(self, child: Node) -> None:
        child.parent, child.row = self, len(self.children)
        self.children.append(child)

    def renumber(self) -> None:
        for n, child in enumerate(self.children):
            child.row = n


def build_tree(ctx: rm.AgentContext, as_of: datetime | None, authors: Mapping[str, str] | None = None) -> Node:
    """Groups in order of their first uncovered item; covered items under the summary that replaced them."""
    root = Node(("root", ""), None)
    live = {c.id: c.summary_item_id for c in ctx.compactions if c.undone_at is None}
    nodes = {i.id: Node(("item", i.id), None) for i in ctx.items}
    groups: dict[str, Node] = {}
    covered_in_group: set[str] = set()
    for item in ctx.items:
        summary = nodes.get(live.get(item.compaction_id or "", ""))
        if summary is not None:
            summary.adopt(nodes[item.id])
            covered_in_group.add(item.group_id)
            continue
        if item.group_id not in groups:
            groups[item.group_id] = Node(("group", item.group_id), None)
            root.adopt(groups[item.group_id])
        groups[item.group_id].adopt(nodes[item.id])
    items = {i.id: i for i in ctx.items}
    for item in ctx.items:
        node = nodes[item.id]
        covered = node.parent is not None and node.parent.key[0] == "item"
        node.value = ItemRow(item, preview(item.content), covered, _after(item.created_at, as_of),
                             len(node.children), _author((authors or {}).get(item.id)))
    by_id = {g.id: g for g in ctx.groups}
    for gid, node in groups.items():
        node.value = _group_row(by_id[gid], [items[c.key[1]] for c in node.children], gid in covered_in_group,
                                as_of)
    return root


def _after(created: datetime | None, as_of: datetime | None) -> bool:
    return as_of is not None and created is not None and created > as_of


def _group_row(group: rm.ContextGroup, items: list[rm.ContextItem], has_covered: bool,
               as_of: datetime | None) -> GroupRow:
    shown = sum(i.visible for i in items)
    state = (Qt.CheckState.Checked if shown == len(items) else
             Qt.CheckState.Unchecked if shown == 0 else Qt.CheckState.PartiallyChecked)
    tokens = sum(i.token_estimate for i in items)
    later = bool(items) and all(_after(i.created_at, as_of) for i in items)
    return GroupRow(group, len(items), tokens, state, has_covered, any(i.locked for i in items), later)


def _author(name: str | None) -> str | None:
    """An operator's name as shown: hidden characters marked, one line."""
    return None if name is None else " ".join(shown(name, lines=True).split())
