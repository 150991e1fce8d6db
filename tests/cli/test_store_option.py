"""`--store` means the same after every command, an empty one is a mistake, and a rule's scope must exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentdesk.cli.main import main
from agentdesk.store.persistence.database import open_store
from agentdesk.store.rules.commands import list_rules


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "s.sqlite"
    open_store(str(path), create=True).close()
    return path


def test_an_empty_store_option_is_refused_not_taken_for_the_default(capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    default = tmp_path / "default.sqlite"
    monkeypatch.setenv("AGENTDESK_STORE", str(default))
    open_store(str(default), create=True).close()
    code, _, _ = run(capsys, "info")  # the default is there and usable: what `--store ''` used to open
    assert code == 0
    code, out, err = run(capsys, "--store", "", "info")
    assert code == 2 and out == "" and "--store is empty" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv", [("audit", "export"), ("audit", "key", "export")])
def test_store_is_taken_after_the_audit_subcommands(argv: tuple[str, ...], store_path: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, *argv, "--store", str(tmp_path / "absent.sqlite"))
    assert code == 5 and "There is no store at" in err and "absent.sqlite" in err, err  # read, not refused
    code, _, err = run(capsys, *argv, "--store", str(store_path))
    assert code == 0 or "holds no audit key for store" in err, err  # a new store has no key to export yet


def test_a_rule_for_a_project_that_is_not_there_is_refused(store_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--store", str(store_path), "rules", "add", "--tool", "shell", "--command", "ls",
                       "--project", "nope", "--actor", "op")
    assert code == 4 and "There is no project with id nope." in err
    code, _, err = run(capsys, "--store", str(store_path), "rules", "add", "--tool", "shell", "--command", "ls",
                       "--actor", "op")
    assert code == 0, err  # the same rule without the bad scope is taken
    store = open_store(str(store_path))
    try:
        assert [r.project_id for r in list_rules(store)] == [None]
    finally:
        store.close()
