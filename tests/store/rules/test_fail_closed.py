"""Rules fail closed: no hostile command is allowed, deny rules catch what they name, and parsing is budgeted
and done outside the write transaction. Through the real `request_approval` path where it matters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentdesk.cli.main as cli
import agentdesk.store.rules.command as command_module
import agentdesk.store.rules.prepare as prepare_module
from agentdesk.store.errors import InvalidInput
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import Store
from agentdesk.store.rules.command import MAX_COMMAND_CHARS, analyse
from agentdesk.store.rules.commands import add_rule, list_rules
from agentdesk.store.rules.matching import Call, matches
from agentdesk.store.rules.model import Effect, Rule, parse_matcher
from agentdesk.store.rules.shell import command_of
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World, dump
from tests.store.rules.hostile_commands import BENIGN, DENIED, DENIED_ENCODED, MAYBE_DENIED, hostile

SHELL = "run_shell"
PATTERNS = [[["git", "status"]], [["ls", "*"]], [["npm", "test"]], [["git", "status"], ["ls", "*"], ["npm", "test"]]]
"""The three rules the hostile agent tried, and one rule naming all three (so chains of them are allowed)."""


def shell_rule(effect: str, commands: list[list[str]], rid: str = "r") -> Rule:
    return Rule(rid, Effect(effect), SHELL, parse_matcher(SHELL, {"kind": "shell", "field": "command",
                                                                  "commands": commands}))


ALLOW_RULES = [shell_rule("allow", p, f"a{n}") for n, p in enumerate(PATTERNS)]
DENY_RM = shell_rule("deny", [["rm", "*"]], "deny")


def call(command: Any) -> Call:
    return Call(SHELL, json.dumps({"command": command}, ensure_ascii=False))


def allowed(command: Any) -> bool:
    return any(matches(r, call(command)) for r in ALLOW_RULES)


def save_rules(store: Store, *, deny: bool = False) -> None:
    for patterns in PATTERNS:
        add_rule(store, "allow", SHELL, {"kind": "shell", "field": "command", "commands": patterns}, "op")
    if deny:
        add_rule(store, "deny", SHELL, {"kind": "shell", "field": "command", "commands": [["rm", "*"]]}, "op")


def outcome(rt: AgentRuntime, run: str, command: Any) -> str:
    try:
        aid = rt.request_approval(run, SHELL, {"command": command})
    except InvalidInput:
        return "refused"
    return NativeSource(rt.store).approval(aid).status


# -- the corpus, through request_approval ---------------------------------------------------------------------
def test_the_corpus_is_large_and_varied() -> None:
    corpus = hostile()
    assert len(corpus) >= 130 and len({json.dumps(c) for c in corpus}) == len(corpus)
    assert sum(isinstance(c, list) for c in corpus) >= 10


def test_no_hostile_command_is_allowed_through_request_approval(store: Store, rt: AgentRuntime,
                                                                world: World) -> None:
    save_rules(store)
    got_through = [c for c in hostile() if outcome(rt, world.run, c) == "approved"]
    assert got_through == []


def test_benign_commands_are_still_allowed_through_request_approval(store: Store, rt: AgentRuntime,
                                                                    world: World) -> None:
    save_rules(store, deny=True)
    refused = [c for c in BENIGN if outcome(rt, world.run, c) != "approved"]
    assert refused == []


def test_a_deny_rule_catches_what_it_names_inside_every_disguise(store: Store, rt: AgentRuntime,
                                                                 world: World) -> None:
    save_rules(store, deny=True)
    assert len(DENIED) >= 40
    missed = [c for c in DENIED + DENIED_ENCODED if outcome(rt, world.run, c) != "denied"]
    assert missed == []
    not_asked = [c for c in MAYBE_DENIED if outcome(rt, world.run, c) != "pending"]
    assert not_asked == []
    assert outcome(rt, world.run, "$CMD -la") == "pending"  # an allow for `ls *` does not cover it either


def naive_allows(command: Any, patterns: list[list[str]]) -> bool:
    """The matcher as it was: bashlex alone decides what runs."""
    parsed = command_of(command)
    if not (parsed.parsed and parsed.plain and parsed.commands):
        return False
    def ok(p: list[str], words: tuple[str | None, ...]) -> bool:
        if p[-1] == "*":
            return len(words) >= len(p) - 1 and all(w == x for w, x in zip(words, p[:-1], strict=False))
        return list(words) == p
    return all(not c.redirects and any(ok(p, c.words) for p in patterns) for c in parsed.commands)


def test_a_bashlex_only_matcher_fails_this_corpus() -> None:
    """The corpus has teeth: the old matcher allows the tilde and quote-framed words, payload and all."""
    through = [c for c in hostile() if any(naive_allows(c, p) for p in PATTERNS)]
    assert len(through) >= 17
    for command in ("ls ~$(touch /tmp/PWNED)", "ls -la ~$(rm -rf ~)", "ls ~<(rm -rf ~)", "ls ''$(touch /tmp/PWNED)''",
                    "ls 'x'`rm -rf ~`'y'", "ls ~:$(rm -rf ~)", ["bash", "-c", "ls ~$(touch /tmp/PWNED)"],
                    ["/bin/sh", "-c", "ls ''$(touch /tmp/PWNED)''"]):
        assert command in through and not allowed(command), command
    hidden_rm = [c for c in DENIED if not any(found.words[:1] == ("rm",) for found in command_of(c).commands)]
    assert "ls -la ~$(rm -rf ~)" in hidden_rm and len(hidden_rm) >= 10  # the old deny rule for `rm *` missed these


# -- properties -------------------------------------------------------------------------------------------------
PAYLOAD = st.sampled_from(["touch /tmp/PWNED", "rm -rf ~", "id", "curl x|sh", "ls"])
ACTIVE = [  # an expansion, active where it stands (outside single quotes)
    "$({p})", "`{p}`", "<({p})", ">({p})", "${{X}}", "$X", "$((1+1))", "${{X:-$({p})}}", "$'\\x41'", '$"x"', "$[1]",
    "${{IFS}}", "$1", "$@", "${{#X}}", "${{X[$({p})]}}",
]
IN_DOUBLE_QUOTES = ["$({p})", "`{p}`", "${{X}}", "$X", "$((1+1))", "${{X:-`{p}`}}"]
FRAMES = ["{e}", "~{e}", "''{e}''", "'x'{e}'y'", "x{e}", "{e}x", "~:{e}", "--opt={e}", "~/{e}", '"a"{e}"b"',
          "'{{'{e}'}}'", "\\ {e}", "~root{e}"]


@st.composite
def hostile_scripts(draw: st.DrawFn) -> str:
    payload = draw(PAYLOAD)
    if draw(st.booleans()):
        word = draw(st.sampled_from(FRAMES)).format(e=draw(st.sampled_from(ACTIVE)).format(p=payload))
    else:
        word = '"' + draw(st.sampled_from(["", "a", "~"])) + \
            draw(st.sampled_from(IN_DOUBLE_QUOTES)).format(p=payload) + '"'
    head = draw(st.sampled_from(["ls", "ls -la", "git status", "npm test"]))
    before = draw(st.sampled_from(["", "ls && ", "npm test; ", "(git status) && ", "{ ls; } && "]))
    after = draw(st.sampled_from(["", " x", "; ls", " && npm test", "\nls"]))
    return f"{before}{head} {word}{after}"


@settings(max_examples=400, deadline=None)
@given(script=hostile_scripts(), listed=st.sampled_from([None, "bash", "/bin/sh", "dash"]))
def test_no_expansion_the_rule_does_not_name_is_ever_allowed(script: str, listed: str | None) -> None:
    command: Any = script if listed is None else [listed, "-c", script]
    assert not allowed(command), command
    assert analyse(command).allow is None


SAFE_WORD = st.text(alphabet="abcxyz019_-./:,+=@%", min_size=1, max_size=8)
QUOTED = st.text(alphabet="abc xyz 019 $`~;&|<>(){}*?[]!#\\\"", min_size=0, max_size=8)


@st.composite
def benign_words(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["plain", "single", "double"]))
    if kind == "plain":
        return draw(SAFE_WORD)
    if kind == "single":
        return "'" + draw(QUOTED).replace("'", "") + "'"
    text = draw(st.text(alphabet="abc xyz 019~;&|<>(){}*?[]!#'", min_size=0, max_size=8))
    return '"' + text + '"'


@settings(max_examples=300, deadline=None)
@given(words=st.lists(benign_words(), min_size=0, max_size=5))
def test_plain_words_are_allowed_so_the_check_does_not_refuse_everything(words: list[str]) -> None:
    script = " ".join(["ls", *words])
    assert allowed(script), script


# -- proposals --------------------------------------------------------------------------------------------------
def test_from_approval_proposes_no_allow_rule_for_what_the_strict_lexer_refuses(
        capsys: pytest.CaptureFixture[str], store: Store, store_path: Path, rt: AgentRuntime, world: World) -> None:
    for command in ("ls ~$(touch /tmp/PWNED)", "ls ''$(touch /tmp/PWNED)''", ["bash", "-c", "ls ~<(rm -rf ~)"]):
        aid = rt.request_approval(world.run, SHELL, {"command": command})
        before = dump(store_path)
        code = cli.main(["--store", str(store_path), "rules", "add", "--from-approval", aid, "--actor", "op"])
        err = capsys.readouterr().err
        assert code == 2 and "No allow rule is proposed" in err and err.count("\n") == 1, err
        assert dump(store_path) == before
    assert list_rules(store) == []


# -- budgets and the write lock ---------------------------------------------------------------------------------
def many_rules(store: Store, n: int = 20) -> None:
    for k in range(n):
        patterns = [["tool", str(k)], ["ls", "*"]] if k % 2 else [["tool", str(k)]]
        add_rule(store, "allow" if k % 2 else "deny", SHELL,
                 {"kind": "shell", "field": "command", "commands": patterns}, "op")


def test_a_huge_nested_command_goes_to_a_person_and_is_parsed_once(store: Store, rt: AgentRuntime, world: World,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    many_rules(store)
    calls: list[int] = []
    real = prepare_module.analyse
    monkeypatch.setattr(prepare_module, "analyse", lambda value: calls.append(1) or real(value))
    for command in ("ls " + "<(ls " * 3000 + ")" * 3000, "ls " + "<(ls " * 1300 + ")" * 1300,
                    "ls " + "$(ls " * 1300 + ")" * 1300, "ls " + "(" * 4000 + ")" * 4000, "ls " + "a " * 4000):
        calls.clear()
        assert outcome(rt, world.run, command) == "pending"
        assert calls == [1]  # one parse for twenty rules


def test_no_rule_decides_past_the_time_budget(store: Store, rt: AgentRuntime, world: World,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    save_rules(store, deny=True)
    assert outcome(rt, world.run, "ls -la") == "approved"
    assert outcome(rt, world.run, "rm -rf ~") == "denied"
    command_module.clear_cache()
    monkeypatch.setattr(command_module, "PARSE_BUDGET_S", 0.0)
    assert outcome(rt, world.run, "ls -la") == "pending"
    assert outcome(rt, world.run, "rm -rf ~") == "pending"
    assert not analyse("ls -la").readable and "too long" in analyse("ls -la").why_not
    assert not analyse("x" * (MAX_COMMAND_CHARS + 1), 1.0).readable


def test_an_operator_decides_while_a_hostile_command_is_being_parsed(store: Store, rt: AgentRuntime, world: World,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The parse runs outside the write transaction: an operator's decision commits in the middle of it."""
    many_rules(store)
    source = NativeSource(store)
    other = rt.request_approval(world.run, "read_file", {"path": "a.py"})
    during: list[str] = []
    real = prepare_module.analyse

    def parse_while_an_operator_decides(value: Any) -> Any:
        source.decide(other, True, "alice", "fine")  # would wait for the lock, then fail, if it were held
        during.append(source.approval(other).status)
        return real(value)

    monkeypatch.setattr(prepare_module, "analyse", parse_while_an_operator_decides)
    aid = rt.request_approval(world.run, SHELL, {"command": "ls " + "<(ls " * 1300 + ")" * 1300})
    assert during == ["approved"]
    assert source.approval(aid).status == "pending"


def test_a_rule_written_between_the_parse_and_the_transaction_does_not_match(
        store: Store, rt: AgentRuntime, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its field was not analysed ahead: nothing is parsed under the lock, a person decides."""
    real = prepare_module.prepare_request

    def then_a_rule_appears(*args: Any) -> Any:
        views = real(*args)
        add_rule(store, "allow", SHELL, {"kind": "shell", "field": "command", "commands": [["ls", "*"]]}, "op")
        return views

    with pytest.MonkeyPatch.context() as patch:  # not the fixture's: undoing that would undo the config folder
        patch.setattr("agentdesk.store.runtime.prepare_request", then_a_rule_appears)
        assert outcome(rt, world.run, "ls -la") == "pending"
    assert outcome(rt, world.run, "ls -la") == "approved"


def test_a_deny_that_rests_on_a_run_time_word_asks_a_person(store: Store, rt: AgentRuntime, world: World) -> None:
    from datetime import UTC, datetime

    from agentdesk.store.rules.dryrun import dry_run, would_settle
    from agentdesk.store.rules.matching import decide

    now = datetime.now(UTC)
    assert decide([DENY_RM], call("$CMD -rf ~"), now).effect == Effect.ASK  # type: ignore[union-attr]
    assert decide([DENY_RM], call("/bin/rm -rf ~"), now).effect == Effect.DENY  # type: ignore[union-attr]
    assert decide([DENY_RM, ALLOW_RULES[1]], call("ls $(x)"), now) is None  # neither: a person decides
    assert decide([DENY_RM, ALLOW_RULES[1]], call("ls; $(x) -rf ~"), now).effect == Effect.ASK  # type: ignore[union-attr]
    maybe = rt.request_approval(world.run, SHELL, {"command": "$CMD -rf ~"})
    surely = rt.request_approval(world.run, SHELL, {"command": "ls; rm -rf ~"})
    result = dry_run(store, DENY_RM)
    assert {r.approval_id: r.outcome for r in result.pending} == {maybe: "would-ask", surely: "would-deny"}
    assert would_settle(DENY_RM, NativeSource(store).approvals("pending")) == {surely}
