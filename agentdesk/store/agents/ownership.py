"""Whose is it: the agent identity that created an agent, a session or an approval.

An agent token may act only on what it made. The runtime writes an audit record for every
agent, session and approval it creates, with the token's name as the actor: that record *is*
the ownership (no extra table, and the audit chain protects it). An owner never changes, so
answers are cached; what the agent API creates is noted at once, so the audit is read only for
things made before this receiver started (one query each, then cached).

Runs and spans belong to their agent; a joined OpenTelemetry trace run (`otr_…`, made by the
receiver from spans) belongs to nobody, so any agent may gate tools inside it and owns the
approvals it asks for there.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from sqlalchemy import select

from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store

CACHE_SIZE = 200_000
CREATED = {"agent": "agent.create", "session": "session.create", "approval": "approval.request", "ask": "ask.create"}
TRACE_RUN_PREFIX = "otr_"


class Ownership:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._owners: OrderedDict[tuple[str, str], str | None] = OrderedDict()
        self._lock = threading.Lock()

    def note(self, entity: str, entity_id: str, owner: str) -> None:
        with self._lock:
            self._owners[(entity, entity_id)] = owner
            if len(self._owners) > CACHE_SIZE:
                self._owners.popitem(last=False)

    def cached_owns(self, name: str, entity: str, entity_id: str) -> bool:
        """True only when the cache says `name` owns it (a miss is not a refusal: read with `owns`)."""
        with self._lock:
            return self._owners.get((entity, entity_id)) == name

    def owner(self, entity: str, entity_id: str) -> str | None:
        """The actor of the entity's creation record; None when it has none (another writer made it)."""
        key = (entity, entity_id)
        with self._lock:
            if key in self._owners:
                return self._owners[key]
        A = sc.AuditRow
        with self.store.reading() as s:
            found = s.execute(select(A.actor).where(A.entity == entity, A.entity_id == entity_id,
                                                    A.action == CREATED[entity]).order_by(A.seq).limit(1)).scalar()
        if found is not None:
            self.note(entity, entity_id, str(found))
        return None if found is None else str(found)

    def owns(self, name: str, entity: str, entity_id: str) -> bool:
        return self.owner(entity, entity_id) == name
