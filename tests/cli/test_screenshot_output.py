"""`gui --screenshot PATH`: a path that cannot be written is refused before Qt starts, naming the output
(not the store), and a missing folder is never created; `--size` takes WxH within sane bounds."""

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
