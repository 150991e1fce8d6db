"""The two lexers of store/rules/lexer.py on their own, and the strict one checked against bash itself."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdesk.store.rules.lexer import (
    Budget,
    OverBudget,
    Refused,
    ansi_c,
    brace_expand,
    deny_candidates,
    strict_commands,
)


def strict(text: str) -> list[tuple[str, ...]]:
    return [c.literal for c in strict_commands(text, Budget.of(1.0))]


def denied(text: str) -> list[tuple[str | None, ...]]:
    return deny_candidates(text, Budget.of(1.0))


@pytest.mark.parametrize("text, reason", [
    ("ls ~$(id)", "~"), ("ls ~:x", "~"), ("ls a~b", "~"), ("ls ''$(id)''", "$"), ("ls 'x'`id`'y'", "$ or a backtick"),
    ("ls \"$(id)\"", "double quotes"), ("ls <(id)", "redirect"), ("ls >(id)", "redirect"), ("ls > f", "redirect"),
    ("ls <<EOF\nx\nEOF", "redirect"), ("ls 2>&1x", "redirect"), ("ls &> f", "&>"), ("ls |& id", "|&"),
    ("ls # x", "comment"), ("! ls", "!"), ("ls !x", "!"), ("if ls; then id; fi", "reserved word 'if'"),
    ("time ls", "reserved word"), ("ls {a,b}", "brace expansion"), ("ls a(b)", "( inside"), ("ls \\\nid", "backslash"),
    ("ls 'x", "never closed"), ("ls \"x", "never closed"), ("ls\r", "U+000D"), ("ls\x00", "NUL"),
    ("ls \uff04(id)", "U+FF04"), ("ls\u00a0x", "U+00A0"), ("ls ^x", "character ^"),
    ("( " * 40 + "ls" + ")" * 40, "nested too deeply"),
    ("ls &&", "no command after"), ("&& ls", "no command before"), ("{ ls }", "does not close"), ("(ls) x", "follows"),
    ("", "no command"), ("ls;;", ";;"), ("a='x[$(id)]'; ((a))", "arithmetic"), ("((ls))", "arithmetic"),
])
def test_the_strict_lexer_refuses_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(Refused, match=None) as caught:
        strict(text)
    assert reason in str(caught.value), (text, str(caught.value))


def test_the_strict_lexer_reads_plain_words() -> None:
    assert strict("ls -la 'a b' \"c\\\"d\" e\\ f ~ ~/x 2>&1 && (git status) || { npm test; }\nls &") == [
        ("ls", "-la", "a b", 'c"d', "e f", "~", "~/x"), ("git", "status"), ("npm", "test"), ("ls",)]
    glob = strict_commands("ls *.py a", Budget.of(1.0))[0]
    assert glob.literal == ("ls", "*.py", "a") and glob.words == ("ls", None, "a")


def test_the_deny_scan_finds_commands_wherever_bash_would_run_them() -> None:
    cases = {
        "ls ~$(rm -rf ~)": ("rm", "-rf", "~"), "ls ''$(rm x)''": ("rm", "x"), "ls 'x'`rm y`'y'": ("rm", "y"),
        "ls \"$(rm z)\"": ("rm", "z"), "echo ${x:-$(rm a)}": ("rm", "a"), "{rm,-rf,~}": ("rm", "-rf", "~"),
        "$'\\x72\\x6d' b": ("rm", "b"), "X=1 rm c": ("rm", "c"), ">f rm d": ("rm", "d"), "r\\\nm e": ("rm", "e"),
        "sudo -u root rm f": ("rm", "f"), "bash -c 'rm g'": ("rm", "g"), "env -S 'rm h'": ("rm", "h"),
        "bash <<< 'rm i'": ("rm", "i"), "echo 'rm j' | sh": ("rm", "j"), "f() { rm k; }": ("rm", "k"),
        "for x in 1; do rm l; done": ("rm", "l"), "ls <(rm m)": ("rm", "m"), "echo $((x[$(rm n)]))": ("rm", "n"),
        "find . -exec rm o {} +": ("rm", "o", "{}", "+"), "eval 'rm p'": ("rm", "p"),
        "rm q 2>&1 >/dev/null": ("rm", "q"), "2>/dev/null rm r": ("rm", "r"),
    }
    for text, want in cases.items():
        assert want in denied(text), (text, denied(text))
    assert (None, "-rf") in denied("$CMD -rf")
    assert not any(c[:1] == ("rm",) for c in denied("echo 'rm -rf ~'"))  # single-quoted: data, not a command


def test_helpers() -> None:
    assert brace_expand("{a,b}{1,2}") == ["a1", "a2", "b1", "b2"]
    assert brace_expand("x{a,{b,c}}y") == ["xay", "xby", "xcy"]
    assert brace_expand("{}") == ["{}"] and brace_expand("{a}") == ["{a}"]
    assert len(brace_expand("{a,b}" * 20)) <= 64 + 2
    assert ansi_c("\\x72\\155\\u00e9\\n\\c@'rest", 0) == ("rm\u00e9\n\x00", 20)


def test_both_scans_stop_at_their_budget() -> None:
    with pytest.raises(OverBudget):
        deny_candidates("ls " * 5000, Budget(0.0))
    with pytest.raises(OverBudget):
        strict_commands("ls " * 5000, Budget(0.0))


# -- the strict lexer against bash ------------------------------------------------------------------------------
BASH = shutil.which("bash")
PLAIN = st.text(alphabet="abcxyz019_-./:,+=@%]", min_size=1, max_size=6)
SINGLE = st.text(alphabet="ab $`~;&|<>(){}*?[]!#\\\"\n", max_size=6).map(lambda t: "'" + t + "'")
DOUBLE = st.text(alphabet="ab ~;&|<>(){}*?[]!#'\n", max_size=6).map(lambda t: '"' + t + '"')
ESCAPED = st.sampled_from(list(";&|<>(){}*?[]!#$`'\" ")).map(lambda c: "\\" + c)
WORD = st.lists(st.one_of(PLAIN, SINGLE, DOUBLE, ESCAPED), min_size=1, max_size=3).map("".join)


@pytest.mark.skipif(BASH is None, reason="no bash on this machine")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(WORD, min_size=1, max_size=4))
def test_what_the_strict_lexer_accepts_bash_runs_with_exactly_those_words(words: list[str], tmp_path: Path) -> None:
    script = "show " + " ".join(words)
    try:
        found = strict(script)
    except Refused:
        return  # refusing is always safe
    run = subprocess.run([str(BASH), "--norc", "--noprofile", "-c", "show() { printf '%s\\0' \"$@\"; }\n" + script],
                         capture_output=True, cwd=tmp_path, timeout=10, check=False)
    argv = run.stdout.decode().split("\0")[:-1]
    assert [("show", *argv)] == found, script
