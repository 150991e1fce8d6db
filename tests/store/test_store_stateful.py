"""Command invariants under random interleavings (hypothesis rule-based state machine).

- an approval is decided at most once, whoever tries, in whatever order, with
  stale retries and expiry racing the operators;
- revisions only grow: the agent's context revision, every item's and every
  group's, across appends, visibility, lock, edit, compact and undo, including
  the commands that fail;
- compaction then undo restores exactly what was there (ids, positions,
  contents, flags, revisions, visible token total);
- every refused command leaves the database dump identical.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import AlreadyDecided, Expired, StaleRevision, StoreError
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import open_store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import dump

_TEMPLATE: list[Path] = []
ACTORS = ("alice", "bob")


def template() -> Path:
    """A migrated empty store, made once and copied per example: migrations are the slow part."""
    if not _TEMPLATE:
        path = Path(tempfile.mkdtemp(prefix="agentdesk-template-")) / "store.sqlite"
        open_store(str(path)).close()
        _TEMPLATE.append(path)
    return _TEMPLATE[0]


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="agentdesk-stateful-"))
        self.path = self.dir / "store.sqlite"
        shutil.copy(template(), self.path)
        self.sources = (NativeSource.open(str(self.path)), NativeSource.open(str(self.path)))
        self.rt = AgentRuntime(self.sources[0].store)
        self._build_world()
        self.status = dict.fromkeys(self.approvals, "pending")
        self.decided_by: dict[str, str] = {}
        self.max_context = 0
        self.max_item: dict[str, int] = {}
        self.max_group: dict[str, int] = {}
        self.compactions: list[str] = []
        self.covered_snapshot: dict[str, list[rm.ContextItem]] = {}

    def _build_world(self) -> None:
        rt = self.rt
        sid = rt.create_session(rt.create_task(rt.create_project("p"), "t"), "s")
        self.agent = rt.create_agent(sid, "agent", "model")
        run = rt.start_run(self.agent, "run")
        for n in range(3):
            gid = rt.new_turn_group(self.agent, "tool" if n == 1 else "turn")
            for k in range(2):
                rt.append_context(self.agent, gid, "message", "user", f"group {n} item {k} " * (n + k + 1))
        self.approvals = [rt.request_approval(run, "shell", {"n": n}, timeout_s=None if n < 3 else 0)
                          for n in range(5)]
        self.overdue = set(self.approvals[3:])

    def teardown(self) -> None:
        for source in self.sources:
            source.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers ---------------------------------------------------------------------------
    def context(self) -> rm.AgentContext:
        return self.sources[0].context(self.agent)

    def attempt(self, call: Callable[[], Any]) -> tuple[bool, Any]:
        """Run a command; a refusal must be a typed StoreError and must leave the database as it was."""
        before = dump(self.path)
        try:
            return True, call()
        except StoreError as exc:
            assert dump(self.path) == before, f"{type(exc).__name__} left changes behind"
            return False, exc

    # -- approvals -------------------------------------------------------------------------
    @rule(who=st.integers(0, 1), n=st.integers(0, 4), approve=st.booleans(), edit=st.booleans())
    def decide(self, who: int, n: int, approve: bool, edit: bool) -> None:
        aid, actor = self.approvals[n], ACTORS[who]
        edited = '{"n": -1}' if approve and edit else None
        ok, result = self.attempt(lambda: self.sources[who].decide(
            aid, approve, actor, reason=None if approve else "not now", edited_arguments=edited))
        state = self.status[aid]
        if ok:
            assert state == "pending" and aid not in self.overdue
            self.status[aid] = result.status
            self.decided_by[aid] = actor
        elif isinstance(result, AlreadyDecided):
            assert state in ("approved", "denied") and result.actor == self.decided_by[aid]
        else:
            assert isinstance(result, Expired) and (state == "expired" or aid in self.overdue)

    @rule(who=st.integers(0, 1))
    def expire(self, who: int) -> None:
        expired = self.sources[who].expire_overdue()
        assert set(expired) == {a for a in self.overdue if self.status[a] == "pending"}
        for aid in expired:
            self.status[aid] = "expired"

    # -- context ---------------------------------------------------------------------------
    @rule(g=st.integers(0, 20), text=st.text(min_size=1, max_size=40))
    def append(self, g: int, text: str) -> None:
        groups = [x for x in self.context().groups if x.kind != "compaction"]
        self.rt.append_context(self.agent, groups[g % len(groups)].id, "message", "assistant", text)

    @rule(g=st.integers(0, 20), visible=st.booleans(), stale=st.booleans())
    def set_visibility(self, g: int, visible: bool, stale: bool) -> None:
        groups = self.context().groups
        group = groups[g % len(groups)]
        ok, result = self.attempt(lambda: self.sources[g % 2].set_group_visibility(
            group.id, visible, group.revision - stale, "alice"))
        assert not (ok and stale) and (ok or not stale or isinstance(result, StaleRevision))

    @rule(i=st.integers(0, 50), locked=st.booleans(), stale=st.booleans())
    def lock(self, i: int, locked: bool, stale: bool) -> None:
        item = self._pick(i)
        ok, _ = self.attempt(lambda: self.sources[i % 2].set_item_locked(
            item.id, locked, item.revision - stale, "bob"))
        assert not (ok and stale)

    @rule(i=st.integers(0, 50), text=st.text(min_size=1, max_size=40), stale=st.booleans())
    def edit(self, i: int, text: str, stale: bool) -> None:
        item = self._pick(i)
        ok, _ = self.attempt(lambda: self.sources[i % 2].edit_item(
            item.id, text, item.revision - stale, "bob"))
        assert not (ok and stale)

    def _pick(self, i: int) -> rm.ContextItem:
        items = self.context().items
        return items[i % len(items)]

    @rule(start=st.integers(0, 50), length=st.integers(1, 4), stale=st.booleans())
    def compact(self, start: int, length: int, stale: bool) -> None:
        self._compact(start, length, stale)

    def _compact(self, start: int, length: int, stale: bool) -> tuple[rm.AgentContext, str | None]:
        ctx = self.context()
        listed = [i for i in ctx.items if i.compaction_id is None]
        first = start % len(listed)
        window = listed[first:first + length]
        ok, comp_id = self.attempt(lambda: self.sources[start % 2].compact(
            self.agent, [i.id for i in window], "summary", "focus", ctx.context_revision - stale, "alice"))
        assert not (ok and stale)
        if not ok:
            return ctx, None
        self.compactions.append(comp_id)
        self.covered_snapshot[comp_id] = window
        return ctx, comp_id

    @rule(n=st.integers(0, 20))
    def undo(self, n: int) -> None:
        if not self.compactions:
            return
        comp_id = self.compactions[n % len(self.compactions)]
        ok, _ = self.attempt(lambda: self.sources[n % 2].undo_compaction(comp_id, "alice"))
        if ok:
            by_id = {i.id: i for i in self.context().items}
            assert [by_id[i.id] for i in self.covered_snapshot[comp_id]] == self.covered_snapshot[comp_id]

    @rule(start=st.integers(0, 50), length=st.integers(1, 4))
    def compact_then_undo(self, start: int, length: int) -> None:
        before, comp_id = self._compact(start, length, stale=False)
        if comp_id is None:
            return
        self.sources[1].undo_compaction(comp_id, "bob")
        after = self.context()
        assert after.items == before.items
        assert after.groups == before.groups
        assert after.visible_tokens == before.visible_tokens

    # -- invariants ------------------------------------------------------------------------
    @invariant()
    def revisions_only_grow(self) -> None:
        ctx = self.context()
        assert ctx.context_revision >= self.max_context
        self.max_context = ctx.context_revision
        for item in ctx.items:
            assert item.revision >= self.max_item.get(item.id, 0)
            self.max_item[item.id] = item.revision
        for group in ctx.groups:
            assert group.revision >= self.max_group.get(group.id, 0)
            self.max_group[group.id] = group.revision

    @invariant()
    def decided_at_most_once(self) -> None:
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            decisions = conn.execute(
                "SELECT entity_id, count(*) FROM audit_log WHERE action IN "
                "('approval.approved', 'approval.denied', 'approval.expired') GROUP BY entity_id").fetchall()
            statuses = dict(conn.execute("SELECT id, status FROM approvals").fetchall())
        finally:
            conn.close()
        assert all(count == 1 for _, count in decisions)
        assert statuses == self.status

    @precondition(lambda self: len(self.compactions) > 0)
    @invariant()
    def audit_chain_holds(self) -> None:
        assert self.sources[1].verify().ok


StoreMachine.TestCase.settings = settings(max_examples=35, stateful_step_count=25, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
TestStoreCommands = StoreMachine.TestCase
