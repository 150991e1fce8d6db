"""`agentdesk simulate --agents 1000 --duration 2`: how long the operator waits for a 2 s simulation.

Runs the command as an operator does (a fresh store, `init`, then `simulate`, each a new process from the
repository root) and prints the wall time of `simulate`, the runs it reports and the load average (the
machine is shared). It then checks what the stop left behind: no run, span or session still `running` or
`waiting`, and `agentdesk verify` exits 0.

Target: at most 6 s (exit 1 on a miss or on anything left open). 2 s is the duration asked for; starting
the interpreter and importing agentdesk costs about 1 s; at the deadline every agent that opened a session
closes it in one transaction (a few hundred, queued for SQLite's one write lock, about 1 s); the rest is
headroom for a loaded two-core machine. Before agents looked for the stop once they held the lock, this
took 21-28 s (every agent still queued at the deadline wrote its session, then closed it step by step).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
AGENTS, DURATION_S, TARGET_S = 1000, 2, 6.0
CLI = [sys.executable, "-c", "import sys; from agentdesk.cli.main import main; sys.exit(main())"]


def agentdesk(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "--store", str(store), *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO)


def left_open(store: Path) -> dict[str, int]:
    conn = sqlite3.connect(store)
    try:
        return {table: conn.execute(f"SELECT count(*) FROM {table} WHERE status IN ('running', 'waiting')"
                                    ).fetchone()[0] for table in ("runs", "spans", "sessions")}
    finally:
        conn.close()


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "sim.sqlite"
        init = agentdesk(store, "init")
        if init.returncode != 0:
            raise SystemExit(f"init failed: {init.stderr[-500:]}")
        began = time.perf_counter()
        sim = agentdesk(store, "simulate", "--agents", str(AGENTS), "--duration", str(DURATION_S), "--seed", "1")
        elapsed = time.perf_counter() - began
        summary = [line for line in sim.stdout.splitlines() if line.startswith("Simulation over")]
        print(f"simulate --agents {AGENTS} --duration {DURATION_S}: {elapsed:.2f} s wall "
              f"(target <= {TARGET_S:.0f} s; load {os.getloadavg()[0]:.2f}); exit {sim.returncode}")
        print(summary[0] if summary else f"no summary: {sim.stderr[-500:]}")
        still = left_open(store)
        verify = agentdesk(store, "verify")
        print(f"left running or waiting: {still}; verify exit {verify.returncode}")
    ok = sim.returncode == 0 and elapsed <= TARGET_S and not any(still.values()) and verify.returncode == 0
    if not ok:
        print("MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
