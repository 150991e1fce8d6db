"""Arguments within budgets: what is found, what is shown, and nothing recurses."""

from __future__ import annotations

import json
import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdesk.store.text.arguments import arguments_hash, inspect, short_hash
from agentdesk.store.text.render import Budget, render
from agentdesk.store.text.visible import is_hidden
from tests.store.text.hostile import HIDDEN_CHARS, SEPARATORS, SPACES, TAGS, TROJAN, ZERO_WIDTH, nested

BAD = {"Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs"}


def shown(value: object, budget: Budget | None = None) -> str:
    return "\n".join(render(json.dumps(value, ensure_ascii=False), budget))


def test_findings_name_the_key_and_offset() -> None:
    inspection = inspect(json.dumps({"command": TROJAN, "url": ZERO_WIDTH}, ensure_ascii=False))
    assert inspection.suspicious
    assert inspection.sentence().startswith(
        "contains 8 hidden characters: RIGHT-TO-LEFT OVERRIDE at 17 in command, LEFT-TO-RIGHT ISOLATE at 18")
    assert inspection.reason() == "8 hidden characters"


def test_tag_characters_say_what_a_model_would_read() -> None:
    inspection = inspect(json.dumps({"note": TAGS}, ensure_ascii=False))
    assert inspection.sentence() == ("contains 15 hidden characters: 15 TAG characters at 2-16 in note, "
                                     "which a model reads as “ignore previous”")


def test_escaped_hidden_characters_are_found_after_decoding() -> None:
    assert inspect('{"a": "x\\u202ey"}').sentence() == "contains 1 hidden character: RIGHT-TO-LEFT OVERRIDE at 1 in a"
    assert not inspect('{"a": "plain", "b": [1, "two\\nlines"]}').suspicious


def test_separators_do_not_break_lines() -> None:
    assert shown({"c": SEPARATORS}) == '{\n  "c": "ls⟨60 \u00d7 U+2028⟩; rm -rf ~"\n}'


def test_a_long_run_of_spaces_is_one_counted_mark() -> None:
    assert shown({"c": SPACES}) == '{\n  "c": "ls⟨100,000 spaces⟩; rm -rf ~"\n}'


def test_a_long_value_keeps_its_head_and_tail() -> None:
    budget = Budget(width=10_000)
    text = shown({"c": "a" * 50_000 + "; rm -rf ~"}, budget)
    assert "⟨… 48,010 more characters: Show all …⟩" in text and text.endswith('; rm -rf ~"\n}')
    assert budget.cut == ["48,010 characters of c"]
    assert "Show all" not in shown({"c": "a" * 50_000}, Budget.unlimited())


def test_990_levels_render_with_a_depth_mark_and_in_full() -> None:
    budget = Budget()
    lines = list(render(nested(990), budget))
    assert any("⟨nested deeper than 24 levels: Show all⟩" in line for line in lines)
    full = list(render(nested(990), Budget.unlimited()))
    assert len(full) == 990 * 2 + 1 and '"deep"' in full[990] and "⟨depth 990⟩" in full[990]


def test_multi_line_strings_are_numbered_blocks_and_quotes_cannot_forge_keys() -> None:
    text = shown({"script": "set -e\necho hi", "x": 'a", "safe": "yes'})
    assert text.splitlines() == ['{', '  "script": ┌ 2 lines', '    1 │ set -e', '    2 │ echo hi', '    └,',
                                 '  "x": "a\\", \\"safe\\": \\"yes"', '}']


def test_long_lines_wrap_visibly_without_splitting_marks() -> None:
    lines = list(render(json.dumps({"c": "x" * 95 + "\u202e" * 5 + "y" * 300}), Budget(width=100)))
    assert all(len(line) <= 100 for line in lines)
    assert lines[2].startswith("    ↪ ") and "⟨5 \u00d7 U+202E⟩" in "".join(lines)


def test_not_json_is_shown_as_text() -> None:
    assert list(render("not json\x1b[31m")) == ['"not json⟨ESC⟩[31m"']


def test_hash_is_of_the_exact_stored_text() -> None:
    assert arguments_hash('{"a":1}') != arguments_hash('{"a": 1}')
    assert len(short_hash(arguments_hash("{}"))) == 12


json_text = st.lists(st.one_of(st.characters(), st.sampled_from((*HIDDEN_CHARS, "\n", "\t", "⟨", "⟩", " " * 20))),
                     max_size=30).map("".join)
json_values = st.recursive(st.none() | st.booleans() | st.integers() | json_text,
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_text, inner, max_size=4),
                           max_leaves=20)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(json_text, json_values, max_size=4))
def test_rendered_arguments_never_hold_a_hidden_character(value: dict[str, object]) -> None:
    text = json.dumps(value, ensure_ascii=False)
    for budget in (Budget(width=40), Budget.unlimited(width=60)):
        for line in render(text, budget):
            assert all(c == "\t" or unicodedata.category(c) not in BAD for c in line), line
    expected = sum(1 for _, s in strings_of(value) for c in s if is_hidden(c) and c not in "\n\t⟨⟩")
    assert len(inspect(text).hidden) == expected


def strings_of(value: object) -> list[tuple[str, str]]:
    """Every key and string in a JSON value (the test's own, recursive walk)."""
    if isinstance(value, str):
        return [("", value)]
    if isinstance(value, dict):
        return [("", k) for k in value] + [p for v in value.values() for p in strings_of(v)]
    if isinstance(value, list):
        return [p for v in value for p in strings_of(v)]
    return []
