"""`agentdesk rules list|add|remove|test` in-process: output, JSON, exit codes, data left intact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentdesk.cli.main as cli
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.rules.commands import list_rules
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World, dump


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_add_list_test_remove(capsys: pytest.CaptureFixture[str], store: Store, store_path: Path,
                              world: World, rt: AgentRuntime) -> None:
    source = NativeSource(store)
    ok = rt.request_approval(world.run, "run_shell", {"command": "npm test", "cwd": "/w"})
    bad = rt.request_approval(world.run, "run_shell", {"command": "npm test", "cwd": "/w"})
    rt.request_approval(world.run, "run_shell", {"command": "npm test && rm -rf ~", "cwd": "/w"})
    waiting = rt.request_approval(world.run, "run_shell", {"command": "npm test", "cwd": "/w"})
    source.decide(ok, True, "alice")
    source.decide(bad, False, "bob", "flaky")
    s = str(store_path)
    code, text, err = run(capsys, "--store", s, "rules", "add", "--tool", "run_shell", "--command", "npm test",
                          "--field", "cwd=*", "--note", "tests are safe", "--actor", "carol", "--json")
    assert code == 0, err
    rule = json.loads(text)
    assert (rule["effect"], rule["matcher"]["commands"], rule["created_by"]) == \
        ("allow", [["npm", "test"]], "carol")
    code, text, _ = run(capsys, "--store", s, "rules", "list")
    assert code == 0 and rule["id"] in text and "tests are safe" in text
    code, text, _ = run(capsys, "--store", s, "rules", "test", rule["id"], "--json")
    report = json.loads(text)
    assert report["summary"] | {} == {"examined": 2, "matched": 2, "would_allow": 2, "would_deny": 0,
                                      "would_ask": 0, "differs": 1, "pending_matched": 1, "truncated": False}
    assert {r["approval_id"]: r["differs"] for r in report["history"]} == {ok: False, bad: True}
    assert [r["approval_id"] for r in report["pending"]] == [waiting]
    code, text, _ = run(capsys, "--store", s, "rules", "test", rule["id"])
    assert code == 0 and "DIFFERS" in text and "1 differ" in text
    code, _, err = run(capsys, "--store", s, "rules", "remove", rule["id"], "--actor", "carol", "--revision", "7")
    assert code == 3 and "revision 1, you had 7" in err
    code, _, _ = run(capsys, "--store", s, "rules", "remove", rule["id"], "--actor", "carol")
    assert code == 0 and list_rules(store) == []


def test_a_rule_from_an_approval_is_its_narrowest(capsys: pytest.CaptureFixture[str], store: Store,
                                                   store_path: Path, world: World, rt: AgentRuntime) -> None:
    aid = rt.request_approval(world.run, "run_shell", {"command": "git status", "cwd": "/w"})
    code, text, err = run(capsys, "--store", str(store_path), "rules", "add", "--from-approval", aid,
                          "--actor", "carol", "--json")
    assert code == 0, err
    rule = json.loads(text)
    assert rule["matcher"]["commands"] == [["git", "status"]]
    assert rule["matcher"]["fields"] == {"cwd": {"equals": "/w"}}
    assert (rule["agent_id"], rule["session_id"]) == (world.agent, world.session)


@pytest.mark.parametrize("argv, code, words", [
    (["rules", "add", "--command", "npm test", "--actor", "x"], 2, "--tool"),
    (["rules", "add", "--tool", "run_shell", "--matcher", "{", "--actor", "x"], 2, "not valid JSON"),
    (["rules", "add", "--tool", "run_shell", "--command", "npm 'test", "--actor", "x"], 2, "split"),
    (["rules", "add", "--tool", "run_shell", "--field", "cwd", "--command", "ls", "--actor", "x"], 2, "NAME=JSON"),
    (["rules", "test", "rul_missing"], 4, "no rule"),
    (["rules", "remove", "rul_missing", "--actor", "x"], 4, "no rule"),
    (["rules", "add", "--from-approval", "apr_missing", "--actor", "x"], 4, "no approval"),
])
def test_bad_input_is_one_sentence_and_writes_nothing(capsys: pytest.CaptureFixture[str], store: Store,
                                                      store_path: Path, world: World, argv: list[str], code: int,
                                                      words: str) -> None:
    before = dump(store_path)
    got, _, err = run(capsys, "--store", str(store_path), *argv)
    assert got == code and words in err and err.count("\n") == 1 and "Traceback" not in err
    assert dump(store_path) == before


def test_hostile_text_is_marked_on_the_terminal_and_in_json(capsys: pytest.CaptureFixture[str], store: Store,
                                                             store_path: Path, world: World,
                                                             rt: AgentRuntime) -> None:
    rt.request_approval(world.run, "run_shell", {"command": "npm test \x1b]0;owned\x07\u202e"})
    code, text, _ = run(capsys, "--store", str(store_path), "rules", "add", "--tool", "run_shell", "--command",
                        "npm *", "--effect", "deny", "--note", "no \x1b[31mred\u202e", "--actor", "x", "--json")
    assert code == 0 and "\x1b" not in text and "\u202e" not in text and "⟨U+202E⟩" in text
    rule_id = json.loads(text)["id"]
    for argv in (["rules", "test", rule_id], ["rules", "test", rule_id, "--json"], ["rules", "list"]):
        code, text, _ = run(capsys, "--store", str(store_path), *argv)
        assert code == 0 and "\x1b" not in text and "\x07" not in text and "\u202e" not in text, argv
