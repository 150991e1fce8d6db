"""Who stopped a lensagent run, read back from the `ingress_requests` row agentdesk wrote with the stop (stop.py).

Apart from stop.py so the tree (tree.py, below the writes) can mark stopped runs without importing the write path.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from agentdesk.store.readmodel import ControlState, RunControl
from agentdesk.store.sources import parsing as parse
from agentdesk.store.sources.sql import marks, rows

CLIENT = "agentdesk"
OPERATION = "stopRun"


def key_of(run_id: str) -> str:
    return f"stop:{run_id}"


def stops(conn: Connection, run_ids: Sequence[str]) -> dict[str, RunControl]:
    """The stop agentdesk recorded for each named run that has one (none on a database without the table)."""
    if not run_ids or not rows(conn, "SELECT 1 AS x FROM sqlite_master WHERE type = 'table' "
                                     "AND name = 'ingress_requests'"):
        return {}
    found: dict[str, RunControl] = {}
    for n in range(0, len(run_ids), 500):
        ids, params = marks("k", [key_of(r) for r in run_ids[n:n + 500]])
        for row in rows(conn, f"SELECT key, response_json FROM ingress_requests WHERE client_id = :c "
                              f"AND key IN ({ids})", c=CLIENT, **params):
            run_id = str(row["key"]).removeprefix("stop:")
            said = parse.json_object(row["response_json"])
            actor, why, at = said.get("stopped_by"), said.get("reason"), said.get("stopped_at")
            found[run_id] = RunControl(run_id, ControlState.STOPPED, actor if isinstance(actor, str) else None,
                                       parse.epoch(at) if isinstance(at, str) else None,
                                       why if isinstance(why, str) else None)
    return found
