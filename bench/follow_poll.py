"""What following a foreign database costs: priming, and one poll after a commit that changed nothing declared.

Every foreign commit (`data_version` moved) costs the watcher one follower poll, so the idle
poll is the price of a busy runtime writing rows no view shows. Builds each runtime's test
fixture in a temporary folder, primes the follower, then times polls. Prints the figures and
exits non-zero when an idle poll's median exceeds `TARGET_MS`.

    PYTHONPATH=. python bench/follow_poll.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from agentdesk.store.sources import open_source
from agentdesk.store.sources.foreign import ForeignSource
from tests.store.sources.fixtures_lensagent import build_lensagent_fixture
from tests.store.sources.fixtures_maka import build_maka_fixture
from tests.store.sources.fixtures_stageflow import build_stageflow_fixture
from tests.store.sources.fixtures_vgxness import build_vgxness_fixture

TARGET_MS = 20.0
POLLS = 50
BUILDERS = {"lensagent": build_lensagent_fixture, "stageflow": build_stageflow_fixture,
            "vgxness": build_vgxness_fixture, "maka": build_maka_fixture}


def measure(name: str, folder: Path) -> tuple[float, float, int]:
    path = folder / f"{name}.db"
    BUILDERS[name](path)
    source = open_source(str(path))
    assert isinstance(source, ForeignSource)
    try:
        started = time.perf_counter()
        source.prime_high_water()
        prime_ms = (time.perf_counter() - started) * 1000
        timings = []
        for _ in range(POLLS):
            started = time.perf_counter()
            assert source.poll_changes() == []
            timings.append((time.perf_counter() - started) * 1000)
        return prime_ms, statistics.median(timings), len(source.follower.tables)
    finally:
        source.close()


def main() -> int:
    missed = False
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'runtime':<10} {'tables':>6} {'prime ms':>9} {'idle poll ms (median)':>22}")
        for name in BUILDERS:
            prime_ms, poll_ms, tables = measure(name, Path(tmp))
            missed = missed or poll_ms > TARGET_MS
            print(f"{name:<10} {tables:>6} {prime_ms:>9.1f} {poll_ms:>22.2f}")
    print(f"target: idle poll median <= {TARGET_MS} ms: {'MISSED' if missed else 'met'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
