"""`agentdesk verify` and `agentdesk audit export` from the command line: sentences and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import agentdesk.cli.main as cli
from agentdesk.store.audit import keys, store_id_of
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World
from tests.store.audit.helpers import seqs, sql

REPO = Path(__file__).resolve().parents[3]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_intact_is_exit_0_with_one_sentence(store_path: Path, world: World,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--store", str(store_path), "verify")
    last = seqs(store_path)[-1]
    assert (code, err) == (0, "")
    assert out == (f"Audit chain intact: {last} records verified, signed from record 1, anchored up to record "
                   f"{last}; approvals, tool calls, rules and context agree with it.\n")


def test_tampered_is_exit_6_naming_the_record(store_path: Path, world: World,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    kept = seqs(store_path)[-2]
    sql(store_path, "DELETE FROM audit_log WHERE seq > ?", kept)
    code, out, err = run(capsys, "--store", str(store_path), "verify")
    assert (code, out) == (6, "")
    assert err.startswith(f"agentdesk: Records are missing after {kept}:") and err.count("\n") == 1
    code, out, err = run(capsys, "--store", str(store_path), "verify", "--json")
    report = json.loads(out)
    assert code == 6 and (report["verdict"], report["failure"], report["broken_seq"]) == (
        "tampered", "records missing", kept + 1)


def test_a_state_disagreement_is_exit_6_naming_the_row(store_path: Path, world: World,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    sql(store_path, "UPDATE approvals SET status = 'approved' WHERE id = ?", world.approval)
    code, out, err = run(capsys, "--store", str(store_path), "verify", "--json")
    assert code == 6 and json.loads(out)["row"] == f"approval {world.approval}"
    assert err.startswith(f"agentdesk: Approval {world.approval} is 'approved' in the table")


def test_a_blob_is_exit_6_in_a_real_process_without_a_traceback(store_path: Path, world: World) -> None:
    """The crash the issue found: `TypeError: Object of type bytes is not JSON serializable`."""
    sql(store_path, "UPDATE audit_log SET payload = ? WHERE seq = ?", b"\x00\x01\xff", seqs(store_path)[2])
    for extra in ([], ["--json"]):
        proc = subprocess.run([sys.executable, "-m", "agentdesk.cli", "--store", str(store_path), "verify",
                               *extra], capture_output=True, text=True, cwd=REPO, timeout=60)
        assert proc.returncode == 6 and "Traceback" not in proc.stderr
        assert "holds binary data (3 bytes)" in proc.stderr


def test_cannot_check_is_exit_7(store: Store, store_path: Path, world: World,
                                capsys: pytest.CaptureFixture[str]) -> None:
    with store.reading() as session:
        sid = store_id_of(session)
    assert sid is not None
    keys.key_path(sid).unlink()
    code, _, err = run(capsys, "--store", str(store_path), "verify")
    assert code == 7 and err.startswith("agentdesk: The signatures cannot be checked")


def test_export_then_verify_against_it_after_a_truncation(store_path: Path, world: World, tmp_path: Path,
                                                          audit_config_dir: Path, rt: AgentRuntime,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The auditor's copy: even with this machine's anchor gone, a later truncation shows against the export."""
    rt.create_project("the record that will be deleted")  # no state row depends on it (projects are not tied)
    exported = tmp_path / "audit.jsonl"
    code, out, err = run(capsys, "--store", str(store_path), "audit", "export", "-o", str(exported))
    total = len(seqs(store_path))
    assert (code, err) == (0, "") and out.startswith(f"Audit log exported to {exported} ({total} records).")
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert lines[0]["type"] == "header" and lines[0]["head"]["seq"] == seqs(store_path)[-1]
    assert [line["type"] for line in lines].count("record") == total
    assert lines[-1]["type"] == "anchor" and lines[-1]["source"] == "export"
    code, out, _ = run(capsys, "--store", str(store_path), "verify", "--anchor", str(exported))
    assert code == 0 and f"anchored in {exported} up to record" in out
    for anchor in (audit_config_dir / "audit").glob("*.anchor.jsonl"):
        anchor.unlink()
    sql(store_path, "DELETE FROM audit_log WHERE seq = ?", seqs(store_path)[-1])
    code, _, err = run(capsys, "--store", str(store_path), "verify")
    assert code == 0  # without any anchor the truncation cannot be seen (docs/audit.md)...
    code, _, err = run(capsys, "--store", str(store_path), "verify", "--anchor", str(exported))
    assert code == 6 and "Records are missing after" in err  # ...but the auditor's export sees it


def test_export_to_stdout_and_a_bad_anchor_file(store_path: Path, world: World, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--store", str(store_path), "audit", "export")
    assert code == 0 and json.loads(out.splitlines()[0])["format"] == "agentdesk-audit-export"
    code, _, err = run(capsys, "--store", str(store_path), "verify", "--anchor", str(tmp_path / "none.jsonl"))
    assert code == 2 and err == f"agentdesk: There is no anchor file at {tmp_path / 'none.jsonl'}.\n"
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\xff\xfe not json\n" + b"x" * 100_000 + b"\n{}\n")
    code, _, err = run(capsys, "--store", str(store_path), "verify", "--anchor", str(junk))
    assert code == 2 and "holds no anchor line" in err


def test_export_carries_blobs_as_hex(store_path: Path, world: World, rt: AgentRuntime,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    sql(store_path, "UPDATE audit_log SET actor = ? WHERE seq = ?", b"\x00\xff", seqs(store_path)[0])
    code, out, _ = run(capsys, "--store", str(store_path), "audit", "export")
    records = [json.loads(line) for line in out.splitlines() if '"record"' in line]
    assert code == 0 and records[0]["actor"] == {"$bytes": "00ff"}
    header = json.loads(out.splitlines()[0])
    assert header["verify"]["verdict"] == "tampered"
