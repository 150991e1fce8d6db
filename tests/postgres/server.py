"""A throwaway PostgreSQL server for tests, CI and benchmarks: initdb + pg_ctl on a Unix socket in a temp dir.

One implementation for every caller: `.ci/run` and `./dev test` run `python tests/postgres/server.py start`
(it prints the URL to export as AGENTDESK_TEST_PG) and `... stop DIR`; the test session starts one itself
when no URL was exported and the binaries exist. Run as root (CI), initdb and pg_ctl run as `postgres`
through runuser, since PostgreSQL refuses to run as root.

The socket is trusted for the `postgres` superuser only; every other login needs its password, so the
role and wrong-password tests meet real authentication.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

URL_ENV = "AGENTDESK_TEST_PG"
DIR_ENV = "AGENTDESK_TEST_PG_DIR"
"""The server's folder, when the caller started it: lets the restart test run pg_ctl restart."""
SERVER_OPTIONS = ("-c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                  "-c max_connections=200")
HBA = "local all postgres trust\nlocal all all scram-sha-256\n"


def find_bin_dir() -> Path | None:
    """pg_ctl's folder: $PG_BIN, the Debian layout (newest major first), or PATH."""
    if os.environ.get("PG_BIN"):
        chosen = Path(os.environ["PG_BIN"])
        return chosen if (chosen / "pg_ctl").exists() else None
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def url_for(socket_dir: Path, database: str = "postgres") -> str:
    return f"postgresql://postgres@/{database}?host={socket_dir}"


def start(bin_dir: Path, base: Path | None = None) -> tuple[Path, str]:
    """Create a cluster in a fresh temp dir and start it; returns (dir, superuser URL)."""
    root = Path(tempfile.mkdtemp(prefix="agentdesk-pg-", dir=base))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    data = root / "data"
    subprocess.run(_as_postgres([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                                 "--no-sync", "-E", "UTF8"]), check=True, stdout=subprocess.DEVNULL)
    subprocess.run(_as_postgres(["sh", "-c", f"printf '{HBA}' > {data}/pg_hba.conf"]), check=True)
    subprocess.run(_as_postgres([str(bin_dir / "pg_ctl"), "-D", str(data), "-w", "-l", str(root / "log"),
                                 "-o", f"-k {root} {SERVER_OPTIONS}", "start"]),
                   check=True, stdout=subprocess.DEVNULL)
    return root, url_for(root)


def pg_ctl(bin_dir: Path, root: Path, action: str) -> None:
    """stop / start / restart the server in `root` (the restart and outage tests use this)."""
    args = [str(bin_dir / "pg_ctl"), "-D", str(root / "data"), "-w", "-m", "fast", "-l", str(root / "log")]
    if action in ("restart", "start"):
        args += ["-o", f"-k {root} {SERVER_OPTIONS}"]
    subprocess.run(_as_postgres([*args, action]), check=True, stdout=subprocess.DEVNULL)


def stop(bin_dir: Path, root: Path) -> None:
    try:
        pg_ctl(bin_dir, root, "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str]) -> int:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        print("no PostgreSQL binaries found (set PG_BIN)", file=sys.stderr)
        return 1
    if argv[:1] == ["start"]:
        root, url = start(bin_dir)
        print(f"{root} {url}")
        return 0
    if argv[:1] == ["stop"] and len(argv) == 2:
        stop(bin_dir, Path(argv[1]))
        return 0
    print("usage: server.py start | stop DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
