"""Following a stageflow database while the runtime writes: commits become `Change` events.

stageflow has no change log and no revision columns, so each table gets the cheapest mark that is
still correct for how the runtime writes it:

- insert-only tables (spans, messages) and new rows anywhere: the highest `rowid` seen;
- sessions and definitions (every update sets `updated_at`), eval scores (upserts set
  `recorded_at`): the newest stamp seen plus a signature of the rows at that stamp, so a second
  write in the same millisecond is not lost;
- turns (`finishTurn`, `setTurnStatus` and `setTurnOutcome` touch no stamp): a signature of every
  active turn plus the newest `TURN_WINDOW` turns (an outcome is changed "after the fact" only
  for a turn that just ended);
- approvals: the pending ones are tracked by id until decided, and a pending approval whose
  deadline passes is announced as changed (it now reads as expired) even though nothing was
  committed: a small timer thread asks for a poll when the next deadline is due.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from agentdesk.store.bus import Change
from agentdesk.store.sources.foreign import ForeignWatcher
from agentdesk.store.sources.stageflow.common import StageflowBase, agent_node_id, iso_now, task_id

TURN_WINDOW = 2_000
DEADLINE_CHECK_S = 0.2
TURN_SIG = ("status", "error_code", "ended_at", "input_tokens", "output_tokens", "cost_usd")


@dataclass
class _State:
    projects: set[str] = field(default_factory=set)
    tasks: set[str] = field(default_factory=set)
    marks: dict[str, int] = field(default_factory=dict)
    stamps: dict[str, str] = field(default_factory=dict)
    sigs: dict[str, dict[Any, tuple[Any, ...]]] = field(default_factory=dict)
    turns: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    pending: dict[str, tuple[str, dict[str, str], bool]] = field(default_factory=dict)
    """approval id → (expires_at, parents, already announced as expired)."""


@dataclass
class _Batch:
    """Changes by level, so a batch lists parents before their children whatever the poll order."""

    levels: dict[str, list[Change]] = field(default_factory=lambda: {
        k: [] for k in ("project", "task", "session", "agent", "run", "span", "approval", "context")})

    def add(self, level: str, entity: str, op: str, entity_id: str, parents: dict[str, str]) -> None:
        self.levels[level].append(Change(entity, op, entity_id, parents, origin="stageflow"))

    def changes(self) -> list[Change]:
        return [c for level in self.levels.values() for c in level]


def _since(rows: list[dict[str, Any]], stamp: str, sigs: dict[Any, tuple[Any, ...]], key: str,
           fields: tuple[str, ...]) -> tuple[list[dict[str, Any]], str, dict[Any, tuple[Any, ...]]]:
    """Rows newer than `stamp`, or at it with a different signature; and the new stamp and signatures."""
    changed = [r for r in rows if r["stamp"] > stamp or sigs.get(r[key]) != tuple(r[f] for f in fields)]
    newest = max([stamp, *(r["stamp"] for r in rows)])
    return changed, newest, {r[key]: tuple(r[f] for f in fields) for r in rows if r["stamp"] == newest}


class WatchMixin(StageflowBase):
    def __init__(self, path: Path, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self._poll_lock = threading.Lock()
        self._state: _State | None = None
        self._deadline_stop = threading.Event()
        self._deadline_thread: threading.Thread | None = None

    # -- watcher hooks ---------------------------------------------------------------------
    def watch(self, poll_interval_s: float | None = None) -> ForeignWatcher:
        watcher = super().watch(poll_interval_s)
        if self._deadline_thread is None:
            self._deadline_thread = threading.Thread(target=self._deadlines, args=(watcher,), daemon=True,
                                                     name="agentdesk-stageflow-deadlines")
            self._deadline_thread.start()
        return watcher

    def _deadlines(self, watcher: ForeignWatcher) -> None:
        while not self._deadline_stop.wait(DEADLINE_CHECK_S):
            now = iso_now()
            with self._poll_lock:
                due = self._state is not None and any(
                    not shown and expires <= now for expires, _, shown in self._state.pending.values())
            if due:
                watcher.poll_once()

    def close(self) -> None:
        self._deadline_stop.set()
        if self._deadline_thread is not None:
            self._deadline_thread.join(timeout=2)
        super().close()

    def prime_high_water(self) -> None:
        with self._poll_lock:
            self._state = _State()
            with self.reading() as conn:
                self._poll(conn, self._state)

    def poll_changes(self) -> list[Change]:
        with self._poll_lock:
            if self._state is None:
                self._state = _State()
                with self.reading() as conn:
                    self._poll(conn, self._state)
                return []
            with self.reading() as conn:
                return self._poll(conn, self._state).changes()

    # -- one poll --------------------------------------------------------------------------
    def _poll(self, conn: Connection, st: _State) -> _Batch:
        """Advance every mark; on the first (priming) call the changes are computed and dropped."""
        batch = _Batch()
        self._watch_definitions(conn, st, batch)
        self._watch_sessions(conn, st, batch)
        self._watch_turns(conn, st, batch)
        self._watch_scores(conn, st, batch)
        self._watch_inserts(conn, st, batch)
        self._watch_approvals(conn, st, batch)
        return batch

    @staticmethod
    def _rows(conn: Connection, sql: str, **params: Any) -> list[dict[str, Any]]:
        return [dict(r._mapping) for r in conn.execute(text(sql), params)]

    def _project_and_task(self, st: _State, batch: _Batch, project_key: str, agent_id: str | None,
                          primed: bool) -> None:
        if project_key not in st.projects:
            st.projects.add(project_key)
            if primed:
                batch.add("project", "project", "insert", project_key, {})
        if agent_id is not None and task_id(project_key, agent_id) not in st.tasks:
            st.tasks.add(task_id(project_key, agent_id))
            if primed:
                batch.add("task", "task", "insert", task_id(project_key, agent_id), {"project": project_key})

    def _watch_definitions(self, conn: Connection, st: _State, batch: _Batch) -> None:
        primed = "definitions" in st.stamps
        rows = self._rows(conn, "SELECT project_key, agent_id, project_key || '/' || agent_id AS k,"
                                " current_revision, archived, updated_at AS stamp FROM agent_definitions"
                                " WHERE updated_at >= :at", at=st.stamps.get("definitions", ""))
        changed, st.stamps["definitions"], st.sigs["definitions"] = _since(
            rows, st.stamps.get("definitions", ""), st.sigs.get("definitions", {}), "k",
            ("current_revision", "archived"))
        for r in changed:
            known = task_id(r["project_key"], r["agent_id"]) in st.tasks
            self._project_and_task(st, batch, r["project_key"], r["agent_id"], primed)
            if primed and known:
                batch.add("task", "task", "update", task_id(r["project_key"], r["agent_id"]),
                          {"project": r["project_key"]})

    def _watch_sessions(self, conn: Connection, st: _State, batch: _Batch) -> None:
        primed = "sessions" in st.stamps
        mark = st.marks.get("sessions", 0)
        rows = self._rows(conn, "SELECT rowid AS rid, session_id, project_key, agent_id, status, title,"
                                " backend, updated_at AS stamp FROM agent_sessions"
                                " WHERE rowid > :rid OR updated_at >= :at",
                          rid=mark, at=st.stamps.get("sessions", ""))
        changed, st.stamps["sessions"], st.sigs["sessions"] = _since(
            rows, st.stamps.get("sessions", ""), st.sigs.get("sessions", {}), "session_id",
            ("status", "title", "backend"))
        st.marks["sessions"] = max([mark, *(r["rid"] for r in rows)])
        for r in changed:
            self._project_and_task(st, batch, r["project_key"], r["agent_id"], primed)
            if not primed:
                continue
            op = "insert" if r["rid"] > mark else "update"
            parents = {"project": r["project_key"], "task": task_id(r["project_key"], r["agent_id"])}
            batch.add("session", "session", op, r["session_id"], parents)
            batch.add("agent", "agent", op, agent_node_id(r["session_id"], r["agent_id"]),
                      parents | {"session": r["session_id"]})

    def _watch_turns(self, conn: Connection, st: _State, batch: _Batch) -> None:
        primed = "turns" in st.marks
        mark = st.marks.get("turns", 0)
        active = [tid for tid, sig in st.turns.items() if sig[0] in ("running", "waiting")]
        marks = ", ".join(f":a{n}" for n in range(len(active))) or "NULL"
        rows = self._rows(conn, "SELECT t.rowid AS rid, t.turn_id, t.session_id, t.status, t.error_code,"
                                " t.ended_at, t.input_tokens, t.output_tokens, t.cost_usd, s.project_key,"
                                " s.agent_id FROM agent_turns t"
                                " LEFT JOIN agent_sessions s ON s.session_id = t.session_id"
                                f" WHERE t.rowid > :floor OR t.turn_id IN ({marks})",
                          floor=max(0, mark - TURN_WINDOW), **{f"a{n}": tid for n, tid in enumerate(active)})
        newest = max([mark, *(r["rid"] for r in rows)])
        turns: dict[str, tuple[Any, ...]] = {}
        for r in rows:
            sig = tuple(r[f] for f in TURN_SIG)
            if r["rid"] > newest - TURN_WINDOW or sig[0] in ("running", "waiting"):
                turns[r["turn_id"]] = sig
            if not primed or (r["rid"] <= mark and st.turns.get(r["turn_id"], sig) == sig):
                continue
            batch.add("run", "run", "insert" if r["rid"] > mark else "update", r["turn_id"],
                      self.parents_of(r["project_key"], r["agent_id"], r["session_id"]))
        st.marks["turns"], st.turns = newest, turns

    def _watch_scores(self, conn: Connection, st: _State, batch: _Batch) -> None:
        primed = "scores" in st.stamps
        rows = self._rows(conn, "SELECT e.turn_id, e.metric, e.turn_id || '/' || e.metric AS k, e.score,"
                                " e.recorded_at AS stamp, t.session_id, s.project_key, s.agent_id"
                                " FROM agent_eval_scores e LEFT JOIN agent_turns t ON t.turn_id = e.turn_id"
                                " LEFT JOIN agent_sessions s ON s.session_id = t.session_id"
                                " WHERE e.recorded_at >= :at", at=st.stamps.get("scores", ""))
        changed, st.stamps["scores"], st.sigs["scores"] = _since(
            rows, st.stamps.get("scores", ""), st.sigs.get("scores", {}), "k", ("score",))
        for r in changed if primed else []:
            batch.add("run", "run", "update", r["turn_id"],
                      self.parents_of(r["project_key"], r["agent_id"], r["session_id"]))

    def _watch_inserts(self, conn: Connection, st: _State, batch: _Batch) -> None:
        """Spans and messages are insert-only: their rowid is the whole story."""
        for table, sql in (
            ("spans", "SELECT sp.rowid AS rid, sp.span_id AS id, sp.turn_id, t.session_id, s.project_key,"
                      " s.agent_id FROM agent_spans sp LEFT JOIN agent_turns t ON t.turn_id = sp.turn_id"
                      " LEFT JOIN agent_sessions s ON s.session_id = t.session_id WHERE sp.rowid > :rid"),
            ("messages", "SELECT m.rowid AS rid, m.message_id AS id, m.turn_id, m.session_id, s.project_key,"
                         " s.agent_id FROM agent_messages m LEFT JOIN agent_sessions s"
                         " ON s.session_id = m.session_id WHERE m.rowid > :rid"),
        ):
            primed = table in st.marks
            mark = st.marks.get(table, 0)
            if not primed:
                st.marks[table] = int(conn.execute(text(f"SELECT COALESCE(MAX(rowid), 0) FROM agent_{table}"))
                                      .scalar_one())
                continue
            rows = self._rows(conn, sql + " ORDER BY 1", rid=mark)
            st.marks[table] = max([mark, *(r["rid"] for r in rows)])
            agents: dict[str, dict[str, str]] = {}
            for r in rows:
                parents = self.parents_of(r["project_key"], r["agent_id"], r["session_id"], r["turn_id"])
                if table == "spans":
                    batch.add("span", "span", "insert", r["id"], parents)
                elif "agent" in parents:
                    group = r["turn_id"] or f"{r['session_id']}/no-turn"
                    batch.add("context", "context_item", "insert", r["id"],
                              {"agent": parents["agent"], "group": group, "session": r["session_id"]})
                    agents[parents["agent"]] = {"agent": parents["agent"], "session": r["session_id"]}
            for agent, parents in agents.items():
                batch.add("context", "context", "update", agent, parents)

    def _watch_approvals(self, conn: Connection, st: _State, batch: _Batch) -> None:
        primed = "approvals" in st.marks
        mark = st.marks.get("approvals", 0)
        tracked = list(st.pending)
        marks = ", ".join(f":p{n}" for n in range(len(tracked))) or "NULL"
        rows = self._rows(conn, "SELECT a.rowid AS rid, a.approval_id, a.session_id, a.turn_id, a.status,"
                                " a.expires_at, s.project_key, s.agent_id FROM agent_approvals a"
                                " LEFT JOIN agent_sessions s ON s.session_id = a.session_id"
                                f" WHERE a.rowid > :rid OR a.approval_id IN ({marks})",
                          rid=mark, **{f"p{n}": aid for n, aid in enumerate(tracked)})
        now = iso_now()
        for gone in set(tracked) - {r["approval_id"] for r in rows}:
            _, parents, _ = st.pending.pop(gone)
            batch.add("approval", "approval", "delete", gone, parents)
        for r in rows:
            aid, overdue = r["approval_id"], r["status"] == "pending" and r["expires_at"] <= now
            parents = self.parents_of(r["project_key"], r["agent_id"], r["session_id"], r["turn_id"])
            if r["rid"] > mark:
                op: str | None = "insert"
            else:
                _, _, shown = st.pending[aid]
                op = "update" if r["status"] != "pending" or (overdue and not shown) else None
            if r["status"] == "pending":
                st.pending[aid] = (r["expires_at"], parents, overdue)
            else:
                st.pending.pop(aid, None)
            if primed and op is not None:
                batch.add("approval", "approval", op, aid, parents)
        st.marks["approvals"] = max([mark, *(r["rid"] for r in rows)])
