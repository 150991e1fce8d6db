"""Following a vgxness database while the runtime writes: commits become `Change` events.

vgxness has no change log, no revision columns and no WAL (so `data_version`, which the base watcher
polls, moves on every foreign commit to the rollback-journal file just the same). Marks per table:

- insert-only tables (`run_events`, `run_checkpoints`) and new rows anywhere: the highest `rowid`;
- `runs` and `agents` (updates set `updated_at`): the newest stamp plus a signature of the rows at
  it; active runs are also tracked by id, in case a status change leaves `updated_at` alone;
- `run_approvals`: the pending ones, tracked by id until resolved (or deleted);
- projects: the set of distinct `project` texts (a new one brings its pass-through task/session).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from agentdesk.store.bus import Change
from agentdesk.store.sources.vgxness.common import (
    ACTIVE_RUN_STATUSES,
    VgxnessBase,
    agent_projects,
    parents,
    session_id,
    task_id,
)

RUN_SIG = ("status", "outcome", "outcome_reason", "phase", "latest_checkpoint_id", "completed_at", "stamp")
AGENT_SIG = ("name", "mode", "parent_agent_id", "stamp")


@dataclass
class _State:
    projects: set[str] = field(default_factory=set)
    agents: set[str] = field(default_factory=set)
    marks: dict[str, int] = field(default_factory=dict)
    stamps: dict[str, str] = field(default_factory=dict)
    sigs: dict[str, dict[str, tuple[Any, ...]]] = field(default_factory=dict)
    pending: dict[str, dict[str, str]] = field(default_factory=dict)
    """pending approval id → its parents (to name them if the row disappears)."""


class _Batch:
    """Changes by level, so parents come before their children whatever the poll order."""

    def __init__(self, live: bool) -> None:
        self.live = live
        self.levels: dict[str, list[Change]] = {
            k: [] for k in ("project", "agent", "run", "span", "approval")}

    def add(self, level: str, op: str, entity_id: str, parent_ids: dict[str, str], entity: str = "") -> None:
        if self.live:
            self.levels[level].append(Change(entity or level, op, entity_id, parent_ids, origin="vgxness"))

    def changes(self) -> list[Change]:
        return [c for level in self.levels.values() for c in level]


class WatchMixin(VgxnessBase):
    def __init__(self, path: Path, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self._poll_lock = threading.Lock()
        self._state: _State | None = None

    def prime_high_water(self) -> None:
        with self._poll_lock, self.reading() as conn:
            self._state = _State()
            self._poll(conn, self._state, _Batch(live=False))

    def poll_changes(self) -> list[Change]:
        with self._poll_lock, self.reading() as conn:
            live = self._state is not None
            self._state = self._state or _State()
            batch = _Batch(live)
            self._poll(conn, self._state, batch)
            return batch.changes()

    def _poll(self, conn: Connection, st: _State, batch: _Batch) -> None:
        homes = agent_projects(conn)
        self._watch_projects(conn, st, batch)
        self._watch_agents(conn, st, batch)
        self._watch_runs(conn, st, batch, homes)
        self._watch_timeline(conn, st, batch, homes)
        self._watch_approvals(conn, st, batch, homes)

    @staticmethod
    def _rows(conn: Connection, sql: str, **params: Any) -> list[dict[str, Any]]:
        return [dict(r._mapping) for r in conn.execute(text(sql), params)]

    @staticmethod
    def _watch_projects(conn: Connection, st: _State, batch: _Batch) -> None:
        found = {r.project for r in conn.execute(text(
            "SELECT project FROM runs UNION SELECT project FROM agents UNION SELECT project FROM sessions"))}
        for project in sorted(found - st.projects):
            batch.add("project", "insert", project, {})
            batch.add("project", "insert", task_id(project), {"project": project}, entity="task")
            batch.add("project", "insert", session_id(project),
                      {"project": project, "task": task_id(project)}, entity="session")
        st.projects |= found

    def _stamped(self, conn: Connection, st: _State, table: str, sql: str, sig_fields: tuple[str, ...],
                 extra_ids: list[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
        """Rows inserted (rowid above the mark) or updated (stamp at/after the newest seen, new signature)."""
        mark, stamp, sigs = st.marks.get(table, 0), st.stamps.get(table, ""), st.sigs.get(table, {})
        ids = extra_ids or []
        marks = ", ".join(f":x{n}" for n in range(len(ids))) or "NULL"
        rows = self._rows(conn, f"{sql} WHERE rowid > :mark OR updated_at >= :stamp OR id IN ({marks})",
                          mark=mark, stamp=stamp, **{f"x{n}": i for n, i in enumerate(ids)})
        changed: list[tuple[str, dict[str, Any]]] = []
        for r in rows:
            sig = tuple(r[f] for f in sig_fields)
            if r["rid"] > mark:
                changed.append(("insert", r))
            elif sigs.get(r["id"], sig) != sig or (r["id"] not in sigs and r["stamp"] > stamp):
                changed.append(("update", r))
        newest = max([stamp, *(r["stamp"] for r in rows)])
        st.marks[table] = max([mark, *(r["rid"] for r in rows)])
        st.stamps[table] = newest
        st.sigs[table] = {r["id"]: tuple(r[f] for f in sig_fields) for r in rows
                          if r["stamp"] == newest or r.get("status") in ACTIVE_RUN_STATUSES}
        return changed

    def _watch_agents(self, conn: Connection, st: _State, batch: _Batch) -> None:
        """A registry row for an agent already shown (named by a run) is an update of that node."""
        for _, r in self._stamped(conn, st, "agents", "SELECT rowid AS rid, id, project, name, mode,"
                                  " parent_agent_id, updated_at AS stamp FROM agents", AGENT_SIG):
            p = parents(r["project"])
            if r["parent_agent_id"]:
                p["parent_agent"] = r["parent_agent_id"]
            batch.add("agent", "update" if r["id"] in st.agents else "insert", r["id"], p)
            st.agents.add(r["id"])

    def _watch_runs(self, conn: Connection, st: _State, batch: _Batch, homes: dict[str, str]) -> None:
        active = [rid for rid, sig in st.sigs.get("runs", {}).items() if sig[0] in ACTIVE_RUN_STATUSES]
        for op, r in self._stamped(conn, st, "runs", "SELECT rowid AS rid, id, project, selected_agent_id,"
                                   " status, outcome, outcome_reason, phase, latest_checkpoint_id,"
                                   " completed_at, updated_at AS stamp FROM runs", RUN_SIG, active):
            agent = r["selected_agent_id"]
            home = homes.get(agent, r["project"])
            if agent not in st.agents:  # a run naming an agent the registry does not hold
                st.agents.add(agent)
                batch.add("agent", "insert", agent, parents(home))
            batch.add("run", op, r["id"], parents(home, agent))

    def _watch_timeline(self, conn: Connection, st: _State, batch: _Batch, homes: dict[str, str]) -> None:
        for table in ("run_events", "run_checkpoints"):
            if table not in st.marks:
                st.marks[table] = int(conn.execute(text(f"SELECT COALESCE(MAX(rowid), 0) FROM {table}"))
                                      .scalar_one())
                continue
            mark = st.marks[table]
            rows = self._rows(conn, f"SELECT t.rowid AS rid, t.id, t.run_id, r.project, r.selected_agent_id"
                                    f" FROM {table} t JOIN runs r ON r.id = t.run_id WHERE t.rowid > :mark"
                                    " ORDER BY 1", mark=mark)
            for r in rows:
                agent = r["selected_agent_id"]
                where = parents(homes.get(agent, r["project"]), agent, r["run_id"])
                batch.add("span", "insert", r["id"], where)
            st.marks[table] = max([mark, *(r["rid"] for r in rows)])

    def _watch_approvals(self, conn: Connection, st: _State, batch: _Batch, homes: dict[str, str]) -> None:
        mark, tracked = st.marks.get("run_approvals", 0), list(st.pending)
        marks = ", ".join(f":p{n}" for n in range(len(tracked))) or "NULL"
        rows = self._rows(conn, "SELECT ap.rowid AS rid, ap.id, ap.run_id, ap.status, r.project,"
                                " r.selected_agent_id FROM run_approvals ap JOIN runs r ON r.id = ap.run_id"
                                f" WHERE ap.rowid > :mark OR ap.id IN ({marks})",
                          mark=mark, **{f"p{n}": a for n, a in enumerate(tracked)})
        for gone in set(tracked) - {r["id"] for r in rows}:
            batch.add("approval", "delete", gone, st.pending.pop(gone))
        for r in rows:
            agent = r["selected_agent_id"]
            p = parents(homes.get(agent, r["project"]), agent, r["run_id"])
            if r["rid"] > mark:
                batch.add("approval", "insert", r["id"], p)
            elif r["status"] != "pending":
                batch.add("approval", "update", r["id"], p)
            if r["status"] == "pending":
                st.pending[r["id"]] = p
            else:
                st.pending.pop(r["id"], None)
        st.marks["run_approvals"] = max([mark, *(r["rid"] for r in rows)])
