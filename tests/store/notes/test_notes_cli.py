"""`agentdesk note`, `label` and `notes` on both backends: what they print, their exit codes, plain text only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentdesk.cli.main as cli
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World


def run(capsys: pytest.CaptureFixture[str], store_path: Path, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["--store", str(store_path), *argv] if argv[0] not in ("note", "label", "notes") else
                    [argv[0], "--store", str(store_path), *argv[1:]])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_note_label_and_the_shift_list(capsys: pytest.CaptureFixture[str], store: Store, store_path: Path,
                                       rt: AgentRuntime, world: World) -> None:
    span = rt.start_span(world.run, "tool", "run_shell")
    code, said, _ = run(capsys, store_path, "note", "add", span, "chose shell \x1b[31mred\x1b[0m", "--actor",
                        "alice")
    assert code == 0 and f"Noted span {span}" in said
    assert run(capsys, store_path, "label", "add", span, "bad-tool-choice", "--actor", "alice")[0] == 0
    assert run(capsys, store_path, "label", "add", f"approval:{world.approval}", "needs-review")[0] == 0
    code, said, _ = run(capsys, store_path, "notes", "--since", "8h")
    assert code == 0 and "alice" in said and "bad-tool-choice" in said
    assert "\x1b" not in said and "⟨ESC⟩[31m" in said
    code, said, _ = run(capsys, store_path, "notes", "--since", "30m", "--label", "bad-tool-choice", "--json")
    listed = json.loads(said)
    assert code == 0 and {e["what"] for e in listed} == {"note", "label"}
    assert {e["target_id"] for e in listed} == {span}
    assert set(listed[0]) == {"what", "target", "target_id", "run_id", "author", "login", "at", "text", "note_id",
                              "labels"}
    code, said, _ = run(capsys, store_path, "note", "show", span, "--json")
    shown = json.loads(said)
    assert [x["label"] for x in shown["labels"]] == ["bad-tool-choice"] and shown["notes"][0]["revision"] == 1


@pytest.mark.parametrize(("argv", "code", "words"), [
    (("notes", "--since", "8 parsecs"), 2, "is neither a duration"),
    (("label", "add", "{run}", "needs\u200breview"), 2, "U+200B"),
    (("label", "add", "{run}", "x" * 65), 2, "at most 64"),
    (("note", "add", "{run}", " "), 2, "needs some text"),
    (("note", "add", "nothing-here", "x"), 4, "No span, run or approval"),
    (("label", "remove", "{run}", "regression"), 3, "has no label"),
    (("note", "edit", "note_missing", "x", "--revision", "1"), 4, "no note"),
])
def test_bad_input_is_one_sentence_and_its_exit_code(capsys: pytest.CaptureFixture[str], store: Store,
                                                     store_path: Path, world: World, argv: tuple[str, ...],
                                                     code: int, words: str) -> None:
    got, _, err = run(capsys, store_path, *(a.format(run=world.run) for a in argv))
    assert got == code and words in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_an_edit_on_a_stale_revision_says_who_changed_it(capsys: pytest.CaptureFixture[str], store: Store,
                                                          store_path: Path, world: World) -> None:
    run(capsys, store_path, "note", "add", world.run, "first", "--actor", "alice")
    note_id = json.loads(run(capsys, store_path, "note", "show", world.run, "--json")[1])["notes"][0]["id"]
    assert run(capsys, store_path, "note", "edit", note_id, "second", "--revision", "1", "--actor", "bob")[0] == 0
    code, _, err = run(capsys, store_path, "note", "edit", note_id, "third", "--revision", "1")
    assert code == 3 and "changed by bob" in err
    assert run(capsys, store_path, "note", "remove", note_id, "--revision", "2")[0] == 0
