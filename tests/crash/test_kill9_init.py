"""`kill -9` an `agentdesk init` at random moments: afterwards there is no store or a whole one, never a
file nothing can open, and `init` again always succeeds.

Each kill waits until the command has started building (its temporary file appears beside the target),
then a random further delay drawn from a fixed seed, so the kills land across the build: while the
migrations run, while the WAL is checkpointed, around the rename.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from agentdesk.store.persistence.database import head_revision
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
KILLS = int(os.environ.get("AGENTDESK_INIT_KILLS", "5"))


def env(root: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), AGENTDESK_STATE_DIR=str(root / "state"),
                AGENTDESK_CONFIG_DIR=str(root / "config"))


def init(store: Path, root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "agentdesk.cli", "--store", str(store), "init"], cwd=REPO,
                            env=env(root), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def building(store: Path, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    """Wait until the build's temporary file exists (or the command already finished)."""
    wait_until(lambda: proc.poll() is not None or store.exists()
               or any(p.name.startswith(f".{store.name}.init-") for p in store.parent.iterdir()),
               timeout_s=timeout_s, poll_s=0.002, what="init's build file")


def state_of(store: Path) -> str:
    """"absent", or "whole" (at the newest schema); anything else is what the test must never see."""
    if not store.exists():
        return "absent"
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        (version,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()
    assert version == head_revision() and {"approvals", "audit_log", "change_log", "spans"} <= tables
    return "whole"


def test_a_killed_init_leaves_no_store_or_a_whole_one(tmp_path: Path) -> None:
    rng = random.Random(26)
    seen = []
    for n in range(KILLS):
        folder = tmp_path / f"k{n}"
        folder.mkdir()
        store = folder / "agentdesk.sqlite"
        proc = init(store, tmp_path)
        building(store, proc)
        with contextlib.suppress(subprocess.TimeoutExpired):  # the kill moment: random, unless init ended first
            proc.wait(timeout=rng.uniform(0.0, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        seen.append(state_of(store))
        again = init(store, tmp_path)
        _, err = again.communicate(timeout=120)
        assert again.returncode == 0, err.decode(errors="replace")
        assert state_of(store) == "whole"
        assert not [p for p in folder.iterdir() if ".init-" in p.name], list(folder.iterdir())
    assert len(seen) == KILLS


def test_a_half_made_store_from_before_is_finished_by_init(tmp_path: Path) -> None:
    """What a killed `init` used to leave: a SQLite header, a WAL and no tables. `init` finishes it."""
    store = tmp_path / "agentdesk.sqlite"
    conn = sqlite3.connect(store)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    assert store.stat().st_size > 0
    proc = init(store, tmp_path)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode(errors="replace")
    assert state_of(store) == "whole"


def test_inits_racing_on_one_path_all_succeed_on_one_whole_store(tmp_path: Path) -> None:
    store = tmp_path / "agentdesk.sqlite"
    procs = [init(store, tmp_path) for _ in range(3)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode(errors="replace")
    assert state_of(store) == "whole"
    assert not [p for p in tmp_path.iterdir() if ".init-" in p.name]
