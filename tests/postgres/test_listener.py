"""The NOTIFY listener across a server restart, and under a burst: nothing missed, nothing applied twice."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.bus import RESET, Change
from agentdesk.store.persistence.database import Store, open_store
from tests.conftest import PgCluster
from tests.waiting import wait_until

WRITER = textwrap.dedent("""
    import sys, time
    from agentdesk.store.persistence.database import open_store
    from agentdesk.store.errors import StoreUnavailable
    from agentdesk.store.runtime import AgentRuntime
    url, count, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    rt = AgentRuntime(open_store(url))
    n = 0
    while n < count:
        try:
            rt.create_project(f"p{n}")
            n += 1
        except StoreUnavailable:  # the server is restarting: try the same one again
            time.sleep(0.05)
        time.sleep(pause)
    print("done", flush=True)
""")


class Recorder:
    def __init__(self) -> None:
        self.changes: list[Change] = []
        self.batches = 0
        self.lock = threading.Lock()

    def __call__(self, batch: Sequence[Change]) -> None:
        with self.lock:
            self.batches += 1
            self.changes.extend(batch)

    def projects(self) -> list[str]:
        with self.lock:
            return [c.id for c in self.changes if c.entity == "project"]


def project_ids(store: Store) -> set[str]:
    from sqlalchemy import text
    with store.engine.connect() as conn:
        return {r[0] for r in conn.execute(text("SELECT id FROM projects"))}


@pytest.fixture
def own_server(pg_cluster: PgCluster) -> Iterator[tuple[Path, Path, str]]:
    """A server of this test's own (bin dir, folder, URL): restarting the session's server would cut off every
    other test running beside this one (pytest-xdist)."""
    from tests.postgres import server
    bin_dir = pg_cluster.bin_dir or server.find_bin_dir()
    if bin_dir is None:
        pytest.fail("the restart test needs PostgreSQL's binaries (pg_ctl) to run a server of its own")
    root, url = server.start(bin_dir)
    try:
        yield bin_dir, root, url
    finally:
        server.stop(bin_dir, root)


@pytest.mark.slow
def test_a_server_restart_mid_stream_loses_and_repeats_nothing(own_server: tuple[Path, Path, str]) -> None:
    from tests.postgres import server
    bin_dir, root, pg_url = own_server
    pg_store = open_store(pg_url)
    source = NativeSource(pg_store)
    recorder = Recorder()
    source.bus.subscribe(recorder)
    watcher = source.watch()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, pg_url, "200", "0.01"], stdout=subprocess.PIPE,
                              text=True)
    wait_until(lambda: len(recorder.projects()) >= 20, timeout_s=60)
    states: list[bool] = []
    stop = threading.Event()

    def sample() -> None:  # what the status bar would read ("not live, reconnecting…" while True)
        while not stop.wait(0.005):
            states.append(watcher.reconnecting)

    sampler = threading.Thread(target=sample)
    sampler.start()
    server.pg_ctl(bin_dir, root, "restart")
    # A fast restart can be over before the listener notices its connection is gone: wait for the
    # reconnect itself, not only for a healthy state (which it also shows before noticing).
    wait_until(lambda: watcher._loop.reconnects >= 1  # type: ignore[attr-defined]
               and watcher.healthy and not watcher.reconnecting, timeout_s=60)
    stop.set()
    sampler.join()
    assert any(states), "the watcher never said it was reconnecting"
    assert writer.stdout is not None
    assert writer.stdout.read().strip() == "done" and writer.wait(120) == 0
    wait_until(lambda: set(recorder.projects()) >= project_ids(pg_store), timeout_s=60)
    seen = recorder.projects()
    assert len(seen) == len(set(seen)) == len(project_ids(pg_store)) >= 200  # none missed, none twice
    seqs = [c.seq for c in recorder.changes if c.op != RESET]  # the reload after the outage repeats the last seq
    assert len(seqs) == len(set(seqs)) and seqs == sorted(seqs)
    assert any(c.op == RESET for c in recorder.changes), "no reload was asked for after the outage"
    assert watcher.healthy and not watcher.reconnecting
    assert watcher._loop.reconnects >= 1  # type: ignore[attr-defined]
    source.close()
    pg_store.close()


@pytest.mark.slow
def test_a_notify_storm_coalesces(pg_url: str, pg_store: Store) -> None:
    """100,000 commits in a burst reach a subscriber as a few hundred batches at most, ending at the last one."""
    source = NativeSource(pg_store)
    recorder = Recorder()
    source.bus.subscribe(recorder)
    watcher = source.watch(poll_interval_s=0.05)
    script = textwrap.dedent("""
        import sys, psycopg
        from agentdesk.store.persistence.postgres.engine import libpq_url
        with psycopg.connect(libpq_url(sys.argv[1]), autocommit=True) as conn:
            for n in range(100_000):  # one commit and one NOTIFY each, as fast as the server takes them
                conn.execute("INSERT INTO change_log (at, origin, entity, op, entity_id, parents) "
                             "VALUES (0, 'storm', 'project', 'update', %s, '{}')", (f"prj_{n % 50}",))
    """)
    loop = watcher._loop
    real_read, reads = loop._read, [0]

    def counted_read() -> object:
        reads[0] += 1
        return real_read()

    loop._read = counted_read
    subprocess.run([sys.executable, "-c", script, pg_url], check=True, timeout=900)
    wait_until(lambda: watcher.high_water >= 100_000, timeout_s=120)
    assert recorder.batches <= reads[0] < 100_000 // 100, "a read per wake-up, wake-ups coalesced, one batch each"
    assert len({c.id for c in recorder.changes if c.entity == "project"}) == 50
    source.close()


def test_the_read_a_notify_wakes_is_one_statement_on_the_listener(pg_url: str, pg_store: Store) -> None:
    """No pooled session per wake-up (it cost five round trips); pruning past the mark still resets."""
    from sqlalchemy import event

    from agentdesk.store.changes.watcher import ChangeWatcher
    from agentdesk.store.persistence.bus import RESET
    from agentdesk.store.persistence.database import open_store
    from agentdesk.store.runtime import AgentRuntime

    recorder = Recorder()
    pg_store.bus.subscribe(recorder)
    watcher = ChangeWatcher(pg_store).start()
    on_engine: list[str] = []
    watcher_thread = watcher._loop._thread._thread  # type: ignore[union-attr]

    @event.listens_for(pg_store.engine, "before_cursor_execute")
    def count(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if threading.current_thread() is watcher_thread:
            on_engine.append(statement)

    other = open_store(pg_url)
    try:
        rt = AgentRuntime(other)
        made = {rt.create_project(f"p{n}") for n in range(5)}
        wait_until(lambda: made <= set(recorder.projects()), timeout_s=30)
        assert on_engine == []  # every read went through the listener's own connection
        seqs = [c.seq for c in recorder.changes]
        assert seqs == sorted(seqs) and len(seqs) == len(set(seqs))
        with pg_store.engine.begin() as conn:  # the log pruned past the watcher's mark: it must reload
            from sqlalchemy import text
            conn.execute(text("DELETE FROM change_log"))
            conn.execute(text("SELECT setval(pg_get_serial_sequence('change_log', 'seq'), :s)"),
                         {"s": watcher.high_water + 10})
        rt.create_project("after the prune")
        wait_until(lambda: any(c.op == RESET for c in recorder.changes), timeout_s=30)
        assert watcher.resets == 1 and on_engine == []
    finally:
        watcher.stop()
        other.close()


def test_a_window_heals_after_a_huge_seq_is_written_and_deleted_by_the_owner(pg_url: str, pg_store: Store) -> None:
    """Only the owner can write the change log by hand now (migration 0012); if it writes a huge seq and deletes
    it again, open windows follow the log again within about a second instead of going silent."""
    import psycopg

    from agentdesk.store.persistence.database import open_store
    from agentdesk.store.persistence.postgres.engine import libpq_url
    from agentdesk.store.runtime import AgentRuntime

    source = NativeSource(pg_store)
    recorder = Recorder()
    source.bus.subscribe(recorder)
    watcher = source.watch(poll_interval_s=0.05)
    writer = open_store(pg_url)
    try:
        with psycopg.connect(libpq_url(pg_url), autocommit=True) as conn:
            conn.execute("INSERT INTO change_log (seq, at, origin, entity, op, entity_id, parents) "
                         "VALUES (2147483000, 0, 'x', 'project', 'update', 'prj_x', '{}')")
            wait_until(lambda: watcher.high_water == 2147483000, timeout_s=10)
            conn.execute("DELETE FROM change_log WHERE seq = 2147483000")
        rt = AgentRuntime(writer)
        rt.create_project("after the jump")  # its notification names a seq below the mark: a check read resets
        wait_until(lambda: watcher.high_water < 2147483000, timeout_s=10)
        pid = rt.create_project("seen")
        wait_until(lambda: any(c.id == pid for c in recorder.changes), timeout_s=10)
    finally:
        writer.close()
        source.close()
