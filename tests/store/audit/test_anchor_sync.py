"""Anchor lines are in the file when the commit returns; their fdatasync is grouped, off the writer's path."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentdesk.store.audit import keys, store_id_of
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World
from tests.store.audit.helpers import seqs
from tests.waiting import wait_until


def _anchor(store: Store) -> Path:
    with store.reading() as session:
        sid = store_id_of(session)
    assert sid is not None
    return keys.anchor_path(sid)


def test_the_line_is_written_before_the_commit_returns_and_synced_later(
        store: Store, world: World, store_path: Path, rt: AgentRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = keys._sync
    monkeypatch.setattr(keys, "_sync", lambda fd: (synced.append(fd), real(fd)))
    keys.flush_anchors()
    synced.clear()
    monkeypatch.setattr(keys._syncer, "delay_s", 60.0)  # the background sync cannot run during the test
    path = _anchor(store)
    for n in range(3):
        rt.create_project(f"grouped {n}")
    anchor = keys.read_anchor(path)
    assert anchor is not None and anchor.max_seq == seqs(store_path)[-1]  # in the file already
    assert synced == [] and keys._syncer.pending() == {path}  # nothing synced on the writer's path
    keys.flush_anchors()
    assert len(synced) == 1 and keys._syncer.pending() == set()  # three commits, one fdatasync


def test_the_background_syncer_flushes_within_its_delay(store: Store, world: World, rt: AgentRuntime,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = keys._sync
    monkeypatch.setattr(keys, "_sync", lambda fd: (synced.append(fd), real(fd)))
    monkeypatch.setattr(keys._syncer, "delay_s", 0.01)
    keys.flush_anchors()
    synced.clear()
    rt.create_project("synced soon")
    wait_until(lambda: synced and not keys._syncer.pending(), what="the anchor synced")
    assert synced and keys._syncer.pending() == set()


def test_a_process_that_exits_right_after_a_commit_has_synced_its_anchor(tmp_path: Path,
                                                                         audit_config_dir: Path) -> None:
    """atexit flushes the pending sync: a CLI decision's anchor is on the disk when the command ends."""
    script = textwrap.dedent(f"""
        import os
        from agentdesk.store.audit import keys
        from agentdesk.store.persistence.database import open_store
        from agentdesk.store.runtime import AgentRuntime
        calls = []
        real = keys._sync
        def spy(fd):
            calls.append(fd)
            real(fd)
            os.write(1, b"synced\\n")
        keys._sync = spy
        keys._syncer.delay_s = 60.0
        store = open_store({str(tmp_path / "exit.sqlite")!r})
        AgentRuntime(store).create_project("then exit")
        os.write(1, b"committed\\n")
    """)
    env = dict(os.environ, AGENTDESK_CONFIG_DIR=str(audit_config_dir), PYTHONPATH=os.getcwd())
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:1] == ["committed"] and "synced" in done.stdout.split()
