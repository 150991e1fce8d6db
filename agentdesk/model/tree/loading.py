"""Lazy loading of the project tree: a node's children, and an agent's runs a page at a time.

`fetchMore` only starts a read on the runner; the rows are inserted when the
answer arrives, already formatted (`reads`). Runs are paged newest first,
so an agent with 100,000 runs opens at once. Reads complete out of order on the
pool, so each carries the ticket `Tickets` issued it with, a row ignores
answers older than the one it shows, and a reset drops them all. Changes about children of a node whose load
is in flight wait on that node and are replayed after the load (the load may
predate them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentdesk.model.services import Services
from agentdesk.model.tasks import Tickets
from agentdesk.model.tree.edits import TreeEdits
from agentdesk.model.tree.host import TreeHost
from agentdesk.model.tree.nodes import Node, NodeStore
from agentdesk.model.tree.reads import Listing, read_children
from agentdesk.store.persistence.bus import Change


class TreeLoader:
    def __init__(self, model: TreeHost, nodes: NodeStore, edits: TreeEdits, services: Services,
                 latest: Tickets, page_size: int, replay: Callable[[Sequence[Change]], None]) -> None:
        self._model, self._nodes, self._edits = model, nodes, edits
        self._source, self._runner, self._latest = services.source, services.runner, latest
        self._page_size = page_size
        self._replay = replay

    @staticmethod
    def can_fetch(node: Node) -> bool:
        """Only the first load: QTreeView calls `fetchMore` on every relayout of an expanded row while
        this is true, which would page through all of an agent's runs on its own."""
        return not node.leaf and not node.loading and not node.loaded

    @staticmethod
    def can_page(node: Node) -> bool:
        return not node.loading and node.has_more()

    def fetch(self, node: Node, limit: int | None = None) -> bool:
        """The first load of a node's children, or the next page of an agent's runs."""
        if not (self.can_fetch(node) or self.can_page(node)):
            return False
        node.loading = True
        after, count = node.runs_loaded, limit or self._page_size  # the page as asked for now
        self._latest.add(lambda ticket: self._load(node, after, count, ticket),
                         on_error=lambda exc: self._failed(node, exc))
        return True

    async def _load(self, node: Node, after: int, count: int, ticket: int) -> None:
        listing = await self._runner.run(read_children, self._source, node.entity, node.id, after, count)
        self._loaded(ticket, node, listing)

    def _failed(self, node: Node, exc: BaseException) -> None:
        if self._nodes.holds(node):
            node.loading = False
            self._model.report_failure(f"Could not load {node.entity or 'projects'} {node.id}: {exc}".strip())

    def _loaded(self, seq: int, node: Node, listing: Listing) -> None:
        if not self._nodes.holds(node):
            return
        node.loading, node.loaded = False, True
        if listing.total is not None:
            node.total = listing.total
        fresh = [n for n in listing.nodes if not self._edits.known(n, seq)]
        if node.entity == "session":
            self._attach_agents(node, fresh, seq)
        else:
            self._edits.append(node, fresh, seq)
        if node.entity == "agent":
            self._edits.info_changed(node)
        self._model.report_loaded(node.entity, node.id)
        deferred = self._nodes.take_deferred(node)
        if deferred:
            self._replay(deferred)

    def _attach_agents(self, session: Node, agents: Sequence[Node], seq: int) -> None:
        """Top-level agents become the session's rows; sub-agents nest under their parent agent.

        Sub-agents of agents new in this load go into their (not yet shown) parent before the
        parents are inserted, so the whole batch is one insertion."""
        made: dict[str, Node] = {}
        tops: list[Node] = []
        for agent in agents:
            parent_id = agent.f.parent_agent or ""
            parent = made.get(parent_id)
            if parent is None and parent_id and self._nodes.find(("agent", parent_id)) is not None:
                self._edits.place(agent, seq)  # the parent agent is already shown
                continue
            made[agent.id] = agent
            if parent is None:
                tops.append(agent)
                continue
            parent.children.insert(parent.n_sub, self._nodes.attach(agent, parent, seq, parent.n_sub))
            parent.n_sub += 1
        self._edits.append(session, tops, seq)
