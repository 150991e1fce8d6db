"""Output paths: `gui --screenshot PATH` and `export -o PATH` refuse a path that cannot be written before any
work, naming the output (not the store); a missing folder is never created; a failed export leaves nothing
half-written; `--size` takes WxH within sane bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentdesk.cli.main import main
from agentdesk.store.native import NativeSource


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "agentdesk.sqlite"
    NativeSource.open(str(path)).close()
    return path


@pytest.mark.parametrize("where", ["missing/dir/shot.png", "."])
def test_an_unwritable_screenshot_path_names_the_output(store: Path, tmp_path: Path, where: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / where
    code = main(["--store", str(store), "gui", "--screenshot", str(target)])
    err = capsys.readouterr().err
    assert code == 2
    assert "screenshot" in err and str(target) in err and "store" not in err.lower()
    assert not (tmp_path / "missing").exists()  # no folder made on the way


@pytest.mark.parametrize("size", ["1366", "10x10", "axb", "99999x768"])
def test_size_must_be_a_window_size(store: Path, tmp_path: Path, size: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--store", str(store), "gui", "--screenshot", str(tmp_path / "x.png"), "--size", size])
    assert code == 2 and "--size" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["missing/dir/run.json", "."])
def test_an_unwritable_export_path_names_the_output(store: Path, tmp_path: Path, where: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / where
    code = main(["--store", str(store), "export", "run_0000000000000000", "-o", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and "export" in err and str(target) in err and "store" not in err.lower()
    assert not (tmp_path / "missing").exists()


def test_a_failed_export_leaves_nothing_half_written(store: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "run.json"
    code = main(["--store", str(store), "export", "run_0000000000000000", "-o", str(target)])
    assert code == 4  # no such run
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("run.json")]  # nor its .part


def test_the_init_hint_names_the_store_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "my store.sqlite"
    code = main(["--store", str(missing), "info"])
    err = capsys.readouterr().err
    assert code == 5 and f"run `agentdesk --store '{missing}' init`" in err
