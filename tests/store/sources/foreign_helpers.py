"""Helpers the stageflow and vgxness tests share: a bus collector, subprocess runners, raw reads.

Kept apart so both systems' tests exercise the same race and the same waiting rules.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentdesk.store.persistence.bus import Change
from agentdesk.store.source import Source

ROOT = Path(__file__).resolve().parents[3]

DECIDER = """
import json, sys, time
from agentdesk.store.errors import AlreadyDecided
from agentdesk.store.sources import open_source
path, approval, start, who = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
src = open_source(path, allow_writes=True)
while time.time() < start:
    time.sleep(0.001)
try:
    src.decide(approval, who.endswith("0"), who, reason="race")
    print(json.dumps({"won": True}))
except AlreadyDecided as exc:
    print(json.dumps({"won": False, "actor": exc.actor, "at": exc.at}))
"""


class Collector:
    """Gathers bus batches; `wait` blocks until a predicate holds over everything received."""

    def __init__(self, src: Source) -> None:
        self.changes: list[tuple[float, Change]] = []
        self._cond = threading.Condition()
        src.bus.subscribe(self._on)

    def _on(self, batch: Sequence[Change]) -> None:
        with self._cond:
            self.changes += [(time.time(), c) for c in batch]
            self._cond.notify_all()

    def wait(self, predicate: Callable[[Change], bool], timeout: float = 3.0) -> tuple[float, Change]:
        deadline = time.time() + timeout
        with self._cond:
            while True:
                for at, change in self.changes:
                    if predicate(change):
                        return at, change
                left = deadline - time.time()
                assert left > 0, f"no matching change; got {[c for _, c in self.changes]}"
                self._cond.wait(left)

    def wait_for(self, entity: str, op: str, entity_id: str, timeout: float = 3.0) -> tuple[float, Change]:
        return self.wait(lambda c: (c.entity, c.op, c.id) == (entity, op, entity_id), timeout)


def run_python(code: str, *args: str) -> str:
    """Run `code` in a fresh interpreter (another process, like the runtime); its stdout."""
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def race_processes(path: Path, approval_id: str, count: int = 4) -> list[dict[str, Any]]:
    """`count` processes decide the same approval at the same instant; each reports won or who beat it."""
    start = time.time() + 2.5  # every interpreter is up and connected by then
    command = [sys.executable, "-c", DECIDER, str(path), approval_id, str(start)]
    procs = [subprocess.Popen([*command, f"proc-{n}"], cwd=ROOT, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for n in range(count)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    return results


def race_threads(sources: Sequence[Source], approval_id: str) -> list[str]:
    """One thread per source (each its own connection) decides the same approval after a barrier."""
    barrier, outcomes = threading.Barrier(len(sources)), []

    def decide(src: Source, n: int) -> None:
        barrier.wait()
        try:
            src.decide(approval_id, n % 2 == 0, f"thread-{n}", reason="race")
            outcomes.append("won")
        except Exception as exc:  # the losers' exception type is what the caller asserts on
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=decide, args=(s, n)) for n, s in enumerate(sources)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(outcomes)


def stored(path: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    """What is in the file, read past agentdesk (read-only)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return conn.execute(sql, params).fetchall()


def sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None
