"""What a rule or a call may not carry: out-of-range expiries, repeated JSON keys, a matcher-less rule unconfirmed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import agentdesk.cli.main as cli
from agentdesk.store.errors import InvalidInput
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.rules.commands import LATEST_EXPIRY, add_rule, list_rules, update_rule
from agentdesk.store.rules.dryrun import propose_rule
from agentdesk.store.rules.matching import Call, matches
from agentdesk.store.rules.model import Effect, Rule
from agentdesk.store.runtime import AgentRuntime
from agentdesk.store.validation import parse_json_arguments, payload_hash
from tests.conftest import World, dump, raw_connect

NPM = {"kind": "shell", "field": "command", "commands": [["npm", "test"]]}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- expiry ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seconds", ["inf", "-inf", "nan", "1e308", "-5", "0", "4e9"])
def test_an_out_of_range_expiry_is_refused_before_anything_is_written(
        capsys: pytest.CaptureFixture[str], store: Store, store_path: Path, seconds: str) -> None:
    before = dump(store_path)
    code, _, err = run(capsys, "--store", str(store_path), "rules", "add", "--tool", "*", "--any-arguments",
                       f"--expires-in={seconds}", "--actor", "x")
    assert code == 2 and "--expires-in must be" in err and err.count("\n") == 1 and "Traceback" not in err
    assert dump(store_path) == before


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 1e308, -1.0, 1e12])
def test_the_store_refuses_an_expiry_it_could_not_read_back(store: Store, value: float) -> None:
    with pytest.raises(InvalidInput, match="expiry must be a time between 1970 and 9999"):
        add_rule(store, "allow", "run_shell", NPM, "alice", expires_at=value)
    rule = add_rule(store, "allow", "run_shell", NPM, "alice")
    with pytest.raises(InvalidInput, match="expiry"):
        update_rule(store, rule.id, 1, "alice", expires_at=value)
    assert [(r.id, r.revision, r.expires_at) for r in list_rules(store)] == [(rule.id, 1, None)]


def test_rules_already_stored_with_any_expiry_are_read_without_overflow(
        capsys: pytest.CaptureFixture[str], store: Store, store_path: Path, rt: AgentRuntime, world: World) -> None:
    """Rows written before the check (or by hand): `rules list` and `request_approval` must survive them."""
    rules = {value: add_rule(store, "deny", "*", {"kind": "any"}, "alice", note=str(value)).id
             for value in ("inf", "1e308", "-inf", "nan", "-1e308")}
    conn = raw_connect(store_path)
    for value, rid in rules.items():
        conn.execute("UPDATE approval_rules SET expires_at = ? WHERE id = ?", (float(value), rid))
    conn.commit()
    conn.close()
    by_note = {r.note: r for r in list_rules(store)}
    assert by_note["inf"].expires_at == by_note["1e308"].expires_at == LATEST_EXPIRY
    assert by_note["-inf"].expires_at is not None and by_note["-inf"].expires_at.year == 1970
    code, text, err = run(capsys, "--store", str(store_path), "rules", "list")
    assert code == 0 and "9999-12-30" in text, err
    aid = rt.request_approval(world.run, "read_file", {"path": "a.py"})
    assert NativeSource(store).approval(aid).status == "denied"  # the far-future deny rules still apply


# -- duplicate keys ----------------------------------------------------------------------------------------------
DUPLICATES = ['{"command":"rm -rf ~","command":"git status"}',
              '{"command":"git status","env":{"X":"1","X":"2"}}',
              '{"a":[{"k":1,"k":2}]}',
              '{"command":"ls","c\\u006fmmand":"rm -rf ~"}']


@pytest.mark.parametrize("text", DUPLICATES)
def test_duplicate_keys_are_refused_at_the_api(rt: AgentRuntime, world: World, store: Store, text: str) -> None:
    with pytest.raises(InvalidInput, match="repeat the key") as caught:
        rt.request_approval(world.run, "run_shell", text)
    assert str(caught.value).count(".") <= 2 and "\n" not in str(caught.value)
    with pytest.raises(InvalidInput, match="repeat the key"):
        parse_json_arguments(text)
    assert len(NativeSource(store).approvals("pending")) == 1  # the world's approval only


def test_duplicate_keys_nested_too_deep_to_recurse_are_refused() -> None:
    deep = '{"a":' * 60 + '{"k":1,"k":2}' + "}" * 60
    with pytest.raises(InvalidInput, match="repeat the key"):
        parse_json_arguments(deep)


def test_duplicate_keys_are_refused_by_the_cli_and_in_an_edit(capsys: pytest.CaptureFixture[str], store: Store,
                                                              store_path: Path, world: World) -> None:
    before = dump(store_path)
    code, _, err = run(capsys, "--store", str(store_path), "approve", world.approval, "--actor", "alice",
                       "--args", DUPLICATES[0])
    assert code == 2 and "repeat the key" in err and err.count("\n") == 1
    assert dump(store_path) == before
    with pytest.raises(InvalidInput, match="repeat the key"):
        NativeSource(store).decide(world.approval, True, "alice", edited_arguments=DUPLICATES[0])


def test_a_stored_row_with_duplicate_keys_matches_no_rule_and_proposes_none(
        store: Store, store_path: Path, rt: AgentRuntime, world: World) -> None:
    everything = Rule("r", Effect.ALLOW, "run_shell", {"kind": "any"})
    deny = Rule("d", Effect.DENY, "run_shell", {"kind": "any"})
    text = DUPLICATES[0]
    assert not matches(everything, Call("run_shell", text)) and not matches(deny, Call("run_shell", text))
    assert payload_hash("run_shell", text) != payload_hash("run_shell", '{"command":"git status"}')
    aid = rt.request_approval(world.run, "run_shell", {"command": "git status"})
    conn = raw_connect(store_path)
    conn.execute("UPDATE approvals SET arguments = ? WHERE id = ?", (text, aid))  # written by hand
    conn.commit()
    conn.close()
    with pytest.raises(InvalidInput, match="repeat a key"):
        propose_rule(NativeSource(store).approval(aid))


# -- a rule with no matcher -------------------------------------------------------------------------------------
def test_a_rule_with_no_matcher_needs_any_arguments(capsys: pytest.CaptureFixture[str], store: Store,
                                                    store_path: Path) -> None:
    s = str(store_path)
    before = dump(store_path)
    for argv in (["--tool", "run_shell"], ["--tool", "*", "--effect", "deny"],
                 ["--tool", "read_file", "--matcher", '{"kind": "any"}']):
        code, _, err = run(capsys, "--store", s, "rules", "add", *argv, "--actor", "x")
        assert code == 2 and "no matcher" in err and "--any-arguments" in err and err.count("\n") == 1, err
    assert dump(store_path) == before
    code, _, err = run(capsys, "--store", s, "rules", "add", "--tool", "*", "--effect", "deny", "--actor", "x")
    assert "every call of every tool" in err
    code, text, err = run(capsys, "--store", s, "rules", "add", "--tool", "read_file", "--any-arguments",
                          "--actor", "x")
    assert code == 0, err
    assert "will allow every call of read_file, whatever its arguments" in text
    code, text, _ = run(capsys, "--store", s, "rules", "list")
    assert code == 0 and "every call" in text
    assert json.loads(run(capsys, "--store", s, "rules", "list", "--json")[1])[0]["matcher"] == {"kind": "any"}


def test_a_rule_with_a_matcher_needs_no_confirmation(capsys: pytest.CaptureFixture[str], store: Store,
                                                     store_path: Path) -> None:
    code, text, err = run(capsys, "--store", str(store_path), "rules", "add", "--tool", "run_shell", "--command",
                          "npm test", "--actor", "x")
    assert code == 0 and "every call" not in text, err


@pytest.mark.parametrize("argv", [
    ["--matcher", '{"kind": "shell", "kind": "any"}'],
    ["--command", "npm test", "--field", 'env={"X": "1", "X": "2"}'],
])
def test_a_rule_whose_json_repeats_a_key_is_refused(capsys: pytest.CaptureFixture[str], store: Store,
                                                    store_path: Path, argv: list[str]) -> None:
    before = dump(store_path)
    code, _, err = run(capsys, "--store", str(store_path), "rules", "add", "--tool", "run_shell", *argv,
                       "--actor", "x")
    assert code == 2 and "ambiguous" in err and "appears twice" in err and err.count("\n") == 1, err
    assert dump(store_path) == before
    from agentdesk.model.rules.draft import RuleForm
    with pytest.raises(InvalidInput, match="ambiguous"):
        RuleForm(tool="run_shell", commands="npm test", fields='{"cwd": {"any": true}, "cwd": {"any": true}}').rule()
