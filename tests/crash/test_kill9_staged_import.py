"""`kill -9` of an `agentdesk import` in the middle of one large trace: nothing of it is visible,
the store is intact, and importing the file again completes the trace (resumed, not duplicated)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
from pathlib import Path

from agentdesk.store.persistence.database import open_store
from tests.crash.test_kill9 import cli, env
from tests.store.ingest.test_staged_import import RUN, big_trace, events_of, visible_runs
from tests.waiting import wait_until

SPANS = 30_001


def stored_spans(path: Path) -> int:
    conn = sqlite3.connect(path, timeout=30)
    try:
        return int(conn.execute("SELECT count(*) FROM spans WHERE run_id = ?", (RUN,)).fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0
    finally:
        conn.close()


def test_kill_9_mid_trace_leaves_nothing_visible_and_a_reimport_completes_it(tmp_path: Path) -> None:
    store_path = tmp_path / "store.sqlite"
    source = big_trace(tmp_path / "big.json", SPANS)
    environ = env(tmp_path)
    subprocess.run(cli(store_path, "init"), env=environ, check=True, capture_output=True, timeout=60)
    proc = subprocess.Popen(cli(store_path, "import", "--quiet", str(source)), env=environ,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: stored_spans(store_path) >= 4_000 or proc.poll() is not None, timeout_s=120,
               poll_s=0.02, what="the import mid-trace")
    assert proc.poll() is None, "the import ended before it could be killed mid-trace"
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    written = stored_spans(store_path)
    # a fast slice may have written every span before the kill: the flip had not run, so still hidden
    assert 4_000 <= written <= SPANS

    conn = sqlite3.connect(store_path)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    store = open_store(str(store_path))
    try:
        assert RUN not in visible_runs(store) and events_of(store, RUN) == 0
    finally:
        store.close()

    again = subprocess.run(cli(store_path, "import", "--quiet", str(source)), env=environ, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    store = open_store(str(store_path))
    try:
        assert visible_runs(store) == {RUN: SPANS}
        # the run's insert is published at the flip, and a span batch when the resumed import wrote spans
        # (a kill after the last span but before the flip leaves it none to write)
        assert events_of(store, RUN) >= (2 if written < SPANS else 1)
    finally:
        store.close()
