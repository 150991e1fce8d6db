"""`agentdesk search`, `critical-path` and `diff`: output, JSON shapes, hostile text, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentdesk.cli.main import main
from agentdesk.store.runtime import AgentRuntime
from tests.store.sources.fixtures_lensagent import build_lensagent_fixture


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def two_runs(rt: AgentRuntime) -> tuple[str, str, str]:
    sid = rt.create_session(rt.create_task(rt.create_project("P"), "T"), "S")
    agent = rt.create_agent(sid, "coder", "m")
    runs = []
    for files in (["payments.py"], ["payments.py", "ledger.py"]):
        run_id = rt.start_run(agent, "fix")
        root = rt.start_span(run_id, "agent", "coder")
        for name in files:
            tool = rt.start_span(run_id, "tool", "read_file", parent_span_id=root,
                                 input_text=json.dumps({"path": name}))
            rt.finish_span(tool, output_text=f"contents of {name} \x1b[31mred\x1b[0m")
        rt.finish_span(root)
        runs.append(run_id)
    rt.request_approval(runs[1], "shell", {"cmd": "cat payments.py"})
    return runs[0], runs[1], tool


def test_search_in_a_run_and_in_the_store(store_path: Path, two_runs: tuple[str, str, str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    _, b, ledger = two_runs
    code, out, _ = run(capsys, "--store", str(store_path), "search", "ledger", "--run", b, "--json")
    assert code == 0
    found = json.loads(out)
    assert found["total"] == 1 and found["spans"][0]["span_id"] == ledger
    code, out, _ = run(capsys, "--store", str(store_path), "search", "payments")
    assert code == 0 and "2 spans, 1 approval, 0 context items in 2 runs" in out
    code, out, _ = run(capsys, "--store", str(store_path), "search", "red", "--run", b)
    assert code == 0 and "\x1b" not in out


def test_bad_query_and_unknown_run(store_path: Path, two_runs: tuple[str, str, str],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--store", str(store_path), "search", "dur>soon")
    assert code == 2 and err.count("\n") == 1 and "duration" in err
    code, _, err = run(capsys, "--store", str(store_path), "critical-path", "run_nope")
    assert code == 4
    code, _, err = run(capsys, "--store", str(store_path), "diff", two_runs[0], "run_nope")
    assert code == 4


def test_critical_path_json_and_text(store_path: Path, two_runs: tuple[str, str, str],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--store", str(store_path), "critical-path", two_runs[1], "--json")
    assert code == 0
    path = json.loads(out)
    assert path["spans"] == len(path["path"]) >= 1
    assert path["summary"].startswith("critical path: ")
    assert abs(sum(r["self_s"] for r in path["path"]) - path["total_s"]) < 1e-3
    code, out, _ = run(capsys, "--store", str(store_path), "critical-path", two_runs[1])
    assert code == 0 and out.startswith("critical path: ")


def test_diff_text_and_json(store_path: Path, two_runs: tuple[str, str, str],
                            capsys: pytest.CaptureFixture[str]) -> None:
    a, b, _ = two_runs
    code, out, _ = run(capsys, "--store", str(store_path), "diff", a, b, "--json")
    assert code == 0
    diff = json.loads(out)
    assert diff["counts"]["added"] == 1 and diff["counts"]["removed"] == 0
    assert diff["totals"]["a"]["spans"] == 2 and diff["totals"]["b"]["spans"] == 3
    code, out, _ = run(capsys, "--store", str(store_path), "diff", a, b)
    assert code == 0 and "+   tool read_file" in out


def test_commands_work_on_a_foreign_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lensagent.db"
    build_lensagent_fixture(path)
    code, out, _ = run(capsys, "--store", str(path), "critical-path", "run_sub", "--json")
    assert code == 0 and json.loads(out)["spans"] >= 1
    code, out, _ = run(capsys, "--store", str(path), "search", "kind:tool", "--run", "run_sub", "--json")
    assert code == 0 and json.loads(out)["scanned"] is True
    code, out, _ = run(capsys, "--store", str(path), "diff", "run_sub", "run_sub", "--json")
    assert code == 0 and set(json.loads(out)["counts"].items()) >= {("added", 0), ("removed", 0)}
