"""Cancel against delivery across processes, on both backends: every message is settled exactly once.

An agent process takes its messages while an operator process cancels the same messages, both released
together. Whoever wins, each message ends delivered (one context item, one `message.deliver` record) or
cancelled (no item, one `message.cancel` record), never both and never twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select

from agentdesk.store.agents.context_view import context_view
from agentdesk.store.messages import commands as messages
from agentdesk.store.messages.reads import read_message
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from tests.conftest import BACKENDS, World

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


def racer(location: str, agent_id: str, role: str, ids: list[str]) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "tests.store.messages.race_worker", location, agent_id, role, *ids],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT)


def test_each_message_is_settled_exactly_once(store: Store, store_path: Path, world: World) -> None:
    ids = [messages.send(store, world.agent, f"race {n}", "alice") for n in range(6)]
    procs = [racer(str(store_path), world.agent, role, ids) for role in ("take", "a")]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        answers.append(json.loads(out.strip().splitlines()[-1]))
    won = Counter(m for answer in answers for m in answer["won"])
    assert set(won) == set(ids) and set(won.values()) == {1}  # each exactly once, by exactly one racer
    delivered = set(answers[0]["won"])
    contents = [e.content for e in context_view(store, world.agent).entries]
    A = sc.AuditRow
    with store.reading() as s:
        records = Counter((r.action, r.entity_id) for r in s.execute(
            select(A.action, A.entity_id).where(A.entity == "message")).all())
    for message_id in ids:
        final = read_message(store, message_id)
        assert final is not None
        text = f"race {ids.index(message_id)}"
        if message_id in delivered:
            assert final.status == "delivered" and contents.count(text) == 1
            assert records[("message.deliver", message_id)] == 1 and records[("message.cancel", message_id)] == 0
        else:
            assert final.status == "cancelled" and contents.count(text) == 0
            assert records[("message.cancel", message_id)] == 1 and records[("message.deliver", message_id)] == 0
