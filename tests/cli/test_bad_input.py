"""Bad input through the real command line: exact exit code, one sentence, and the store untouched.

Every case runs `python -m agentdesk.cli` in a subprocess, as an operator or a script
would. "Untouched" is checked on the bytes: the store is closed first (its last
connection checkpoints and removes the WAL), so the main file holds everything,
and afterwards the main file must hash the same and any WAL must hold no frames.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agentdesk.store.persistence.database import Store
from tests.conftest import World

REPO = Path(__file__).resolve().parents[2]
PR_CAPBSET_DROP, CAP_DAC_OVERRIDE = 24, 1


def agentdesk(*args: str, stdin: str | None = None, preexec: Callable[[], None] | None = None,
              timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, AGENTDESK_STORE=str(REPO / "no-such-default-store.sqlite"))
    return subprocess.run([sys.executable, "-m", "agentdesk.cli", *args], input=stdin, capture_output=True,
                          text=True,
                          cwd=REPO, env=env, timeout=timeout, preexec_fn=preexec)


def agentdesk_all(*commands: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """Several independent invocations at once (each its own process), to keep the suite quick."""
    env = dict(os.environ, AGENTDESK_STORE=str(REPO / "no-such-default-store.sqlite"))
    procs = [(argv, subprocess.Popen([sys.executable, "-m", "agentdesk.cli", *argv], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd=REPO, env=env))
             for argv in commands]
    results = []
    for argv, proc in procs:
        out, err = proc.communicate(timeout=60)
        results.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    return results


def refused(result: subprocess.CompletedProcess[str], code: int, *fragments: str) -> str:
    """The exit code, exactly one `agentdesk: ...` line on stderr, no traceback; returns the line."""
    lines = result.stderr.splitlines()
    assert result.returncode == code, (result.returncode, result.stderr)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("agentdesk: ") and "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def fingerprint(path: Path) -> tuple[str, int]:
    """The main file's hash and the WAL's size (a WAL with no frames changes nothing)."""
    wal = path.with_name(path.name + "-wal")
    return hashlib.sha256(path.read_bytes()).hexdigest(), wal.stat().st_size if wal.exists() else 0


@pytest.fixture
def closed(store: Store, store_path: Path, world: World) -> World:
    """The `world` store, closed: its file alone holds every byte."""
    store.close()
    assert not store_path.with_name(store_path.name + "-wal").exists()
    return world


def approval_status(path: Path, approval_id: str) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return str(conn.execute("SELECT status FROM approvals WHERE id = ?", (approval_id,)).fetchone()[0])
    finally:
        conn.close()


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.sqlite"
    path.write_bytes(b"meeting notes, definitely not SQLite\n" * 100)
    before = fingerprint(path)
    store = ["--store", str(path)]
    for result in agentdesk_all([*store, "info"], [*store, "approve", "apr_x", "--actor", "ops"], [*store,
                                                                                                   "init"]):
        refused(result, 5, "not a SQLite database")
    assert fingerprint(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.sqlite"]


def test_a_sqlite_database_of_another_schema(tmp_path: Path) -> None:
    path = tmp_path / "crm.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);"
                       "INSERT INTO customers (name) VALUES ('Ada');")
    conn.close()
    before = fingerprint(path)
    store = ["--store", str(path)]
    for result in agentdesk_all([*store, "approvals"], [*store, "approve", "apr_x", "--actor", "ops"],
                                [*store, "init"]):
        refused(result, 5, "customers")
    assert fingerprint(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crm.sqlite"]  # not even switched to WAL


def test_a_store_from_a_newer_agentdesk(store_path: Path, closed: World) -> None:
    conn = sqlite3.connect(store_path)
    conn.execute("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    conn.commit()
    conn.close()
    before = fingerprint(store_path)
    store = ["--store", str(store_path)]
    for result in agentdesk_all([*store, "approvals"], [*store, "verify"], [*store, "init"],
                                [*store, "deny", closed.approval, "--actor", "ops", "--reason", "no"]):
        refused(result, 5, "newer agentdesk", "9999_from_the_future")
    assert fingerprint(store_path) == before


def test_a_store_locked_by_another_writer_past_the_busy_timeout(store_path: Path, closed: World) -> None:
    before = fingerprint(store_path)
    holder = sqlite3.connect(store_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        result = agentdesk("--store", str(store_path), "--busy-timeout", "0.2", "approve", closed.approval,
                           "--actor", "ops")
        # Readers are not blocked by a writer in WAL mode: listing still works meanwhile.
        listing = agentdesk("--store", str(store_path), "approvals", "--json")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    refused(result, 5, "locked")
    # The wait it reports is its own measure of the lock wait (no interpreter start-up in it): the operator's
    # 0.2 s busy timeout, not a runtime's 30 s deadline.
    waited = re.search(r"stayed locked by another writer for ([0-9.]+) s", result.stderr)
    assert waited is not None and float(waited.group(1)) < 2, result.stderr
    assert listing.returncode == 0 and [a["id"] for a in json.loads(listing.stdout)] == [closed.approval]
    assert approval_status(store_path, closed.approval) == "pending"
    assert fingerprint(store_path) == before


def without_root_file_override() -> None:
    """Run the child as root *minus* CAP_DAC_OVERRIDE, so file modes bind it like any user.

    Tests run as root here, and root ignores `chmod 0444`. Dropping the capability from the
    bounding set before exec leaves the child unable to write a read-only file for real
    (opening it for writing fails with EACCES), with no need for another user who could
    read the interpreter in /root. As a normal user this does nothing.
    """
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE) failed")


def test_a_read_only_store_file(store_path: Path, closed: World) -> None:
    store_path.chmod(0o444)
    before = fingerprint(store_path)
    try:
        check = subprocess.run([sys.executable, "-c", f"open({str(store_path)!r}, 'ab')"],
                               capture_output=True,
                               text=True, preexec_fn=without_root_file_override)
        assert "PermissionError" in check.stderr, "the child could still write the 0444 file"
        denied = agentdesk("--store", str(store_path), "approve", closed.approval, "--actor", "ops",
                           preexec=without_root_file_override)
        listing = agentdesk("--store", str(store_path), "approvals", "--json",
                            preexec=without_root_file_override)
    finally:
        store_path.chmod(0o644)
    refused(denied, 5, "read-only")
    assert listing.returncode == 0, listing.stderr
    assert [a["id"] for a in json.loads(listing.stdout)] == [closed.approval]  # reading still works
    assert fingerprint(store_path) == before
    assert approval_status(store_path, closed.approval) == "pending"


def test_arguments_that_are_not_a_json_object(store_path: Path, closed: World) -> None:
    before = fingerprint(store_path)
    approve = ["--store", str(store_path), "approve", closed.approval, "--actor", "ops", "--args"]
    cases = {"{nope": "not valid JSON", "[1, 2]": "must be a JSON object", "": "not valid JSON"}
    for result, fragment in zip(agentdesk_all(*[[*approve, payload] for payload in cases]), cases.values(),
                                strict=True):
        refused(result, 2, fragment)
    assert fingerprint(store_path) == before
    assert approval_status(store_path, closed.approval) == "pending"


def test_a_ten_megabyte_argument_payload(store_path: Path, closed: World, tmp_path: Path) -> None:
    payload = json.dumps({"content": "x" * 10_000_000})
    big = tmp_path / "args.json"
    big.write_text(payload)
    before = fingerprint(store_path)
    via_stdin = agentdesk("--store", str(store_path), "approve", closed.approval, "--actor", "ops", "--args",
                          "-",
                          stdin=payload)
    (via_file,) = agentdesk_all(["--store", str(store_path), "approve", closed.approval, "--actor", "ops",
                                 "--args", f"@{big}"])
    refused(via_stdin, 2, "more than 1,000,000 bytes", "standard input")  # a pipe is read only past the limit
    refused(via_file, 2, "10,000,015 bytes", "1,000,000")
    assert fingerprint(store_path) == before
    assert approval_status(store_path, closed.approval) == "pending"


def test_unknown_ids(store_path: Path, closed: World) -> None:
    before = fingerprint(store_path)
    store = ["--store", str(store_path)]
    for result in agentdesk_all([*store, "approve", "apr_0000000000000000", "--actor", "ops"],
                                [*store, "deny", "apr_0000000000000000", "--actor", "ops", "--reason", "no"]):
        refused(result, 4, "no approval with id apr_0000000000000000")
    assert fingerprint(store_path) == before


def test_a_mistyped_store_path_is_not_created(tmp_path: Path) -> None:
    typo = tmp_path / "agentdsek.sqlite"
    store = ["--store", str(typo)]
    for result in agentdesk_all([*store, "info"], [*store, "watch", "--timeout", "0.1"],
                                [*store, "approve", "apr_x", "--actor", "ops"]):
        refused(result, 5, "no store at")
    assert list(tmp_path.iterdir()) == []


def test_blank_actor_or_reason_is_refused(store_path: Path, closed: World) -> None:
    before = fingerprint(store_path)
    store = ["--store", str(store_path)]
    blank_actor, blank_reason = agentdesk_all([*store, "approve", closed.approval, "--actor", "   "],
                                              [*store, "deny", closed.approval, "--actor", "ops", "--reason",
                                               " "])
    refused(blank_actor, 2, "actor")
    refused(blank_reason, 2, "reason")
    assert fingerprint(store_path) == before


def test_processes_deciding_the_same_approval_at_once(store_path: Path, closed: World) -> None:
    """Four operators press a button at the same moment: one decision wins, the others are told who won."""
    deciders = [("approve", "alice"), ("deny", "bob"), ("approve", "carol"), ("deny", "dave")]
    env = dict(os.environ)
    procs = []
    for verb, actor in deciders:
        extra = ["--reason", f"{actor} says no"] if verb == "deny" else []
        procs.append(subprocess.Popen([sys.executable, "-m", "agentdesk.cli", "--store", str(store_path), verb,
                                       closed.approval, "--actor", actor, *extra], cwd=REPO, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = [(p.wait(timeout=60), *p.communicate()) for p in procs]
    winners = [n for n, (code, _out, _err) in enumerate(results) if code == 0]
    assert len(winners) == 1, results
    verb, actor = deciders[winners[0]]
    status = "approved" if verb == "approve" else "denied"
    for n, (code, _out, err) in enumerate(results):
        if n != winners[0]:
            assert code == 3, results
            assert err.count("\n") == 1 and f"already {status} by {actor}" in err, err
    conn = sqlite3.connect(store_path)
    try:
        decided_by, stored = conn.execute("SELECT decided_by, status FROM approvals WHERE id = ?",
                                          (closed.approval,)).fetchone()
        decisions = conn.execute("SELECT count(*) FROM audit_log WHERE entity_id = ? AND action IN "
                                 "('approval.approved', 'approval.denied')", (closed.approval,)).fetchone()[0]
    finally:
        conn.close()
    assert (decided_by, stored, decisions) == (actor, status, 1)


def test_a_tampered_audit_record(store_path: Path, closed: World) -> None:
    assert agentdesk("--store", str(store_path), "verify").returncode == 0
    conn = sqlite3.connect(store_path)
    seq = conn.execute("SELECT seq FROM audit_log ORDER BY seq LIMIT 1 OFFSET 2").fetchone()[0]
    conn.execute("UPDATE audit_log SET payload = '{\"name\": \"Someone else\"}' WHERE seq = ?", (seq,))
    conn.commit()
    conn.close()
    before = fingerprint(store_path)
    refused(agentdesk("--store", str(store_path), "verify"), 6, f"Record {seq} was changed",
            "does not match its hash")
    as_json = agentdesk("--store", str(store_path), "verify", "--json")
    assert as_json.returncode == 6
    context = {"notes": [], "keyed_from": None, "anchored_seq": None, "keys": [], "anchor_format": None,
               "older_anchor_lines": 0, "restored": []}  # what verify says beside the verdict: not checked here
    assert json.loads(as_json.stdout) | context == {
        "ok": False, "verdict": "tampered", "records": seq - 1, "broken_seq": seq, "failure": "content changed",
        "reason": f"Record {seq} was changed: its content does not match its hash (content changed).",
        "row": None, **context}
    assert fingerprint(store_path) == before


def test_a_wal_store_in_a_read_only_folder(store_path: Path, closed: World, tmp_path: Path) -> None:
    """WAL, no -shm, a folder nobody may write: read immutable, not "not a readable SQLite database"."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    moved = folder / store_path.name
    store_path.rename(moved)
    assert moved.read_bytes()[18] == 2, "the fixture store is not in WAL mode"
    before = fingerprint(moved)
    folder.chmod(0o555)
    try:
        listing = agentdesk("--store", str(moved), "approvals", "--json", preexec=without_root_file_override)
        info = agentdesk("--store", str(moved), "info", preexec=without_root_file_override)
        left = sorted(p.name for p in folder.iterdir())
    finally:
        folder.chmod(0o755)
    assert listing.returncode == 0, listing.stderr
    assert [a["id"] for a in json.loads(listing.stdout)] == [closed.approval]
    assert info.returncode == 0 and "agentdesk store" in info.stdout, info.stderr
    assert left == [moved.name]  # no -wal, no -shm
    assert fingerprint(moved) == before


def test_invalid_utf8_in_a_store_reads_with_replacement_marks(store_path: Path, closed: World) -> None:
    """Bytes that are not UTF-8 in a TEXT column (another program wrote them): listed, marked, exit 0."""
    with sqlite3.connect(store_path) as conn:
        conn.execute("UPDATE approvals SET tool_name = CAST(? AS TEXT) WHERE id = ?",
                     (b"rm\xff\xfe-rf", closed.approval))
    conn.close()
    (listing, table) = agentdesk_all(["--store", str(store_path), "approvals", "--json"],
                                     ["--store", str(store_path), "approvals"])
    assert listing.returncode == 0 and table.returncode == 0, (listing.stderr, table.stderr)
    assert [a["tool"] for a in json.loads(listing.stdout)] == ["rm\ufffd\ufffd-rf"]
    assert "rm\ufffd\ufffd-rf" in table.stdout
