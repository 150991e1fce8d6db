"""`gui --screenshot PATH`: the PNG is written beside the target and renamed into place (issue 26)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from agentdesk.gui.window.screenshot import save_picture


class HalfWritten:
    """A save that writes part of a file and then fails (a full disk, a killed encoder)."""

    def save(self, path: str, fmt: str, /) -> bool:
        Path(path).write_bytes(b"\x89PNG\r\n\x1a\n half")
        return False


class Raising:
    def save(self, path: str, fmt: str, /) -> bool:
        Path(path).write_bytes(b"\x89PNG partial")
        raise OSError(28, "No space left on device")


def _image() -> QImage:
    image = QImage(8, 6, QImage.Format.Format_RGB32)
    image.fill(0x336699)
    return image


def test_a_screenshot_lands_whole_with_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "shot.png"
    save_picture(_image(), target)
    assert target.read_bytes().startswith(b"\x89PNG") and QImage(str(target)).width() == 8
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shot.png"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("picture", [HalfWritten(), Raising()], ids=["save-false", "save-raises"])
def test_a_failed_write_leaves_the_old_screenshot_and_no_part_file(tmp_path: Path, picture: object) -> None:
    target = tmp_path / "shot.png"
    save_picture(_image(), target)
    os.chmod(target, 0o640)
    before = target.read_bytes()
    with pytest.raises(OSError):
        save_picture(picture, target)  # type: ignore[arg-type]
    assert target.read_bytes() == before and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shot.png"]
    fresh = tmp_path / "new.png"
    with pytest.raises(OSError):
        save_picture(picture, fresh)  # type: ignore[arg-type]
    assert not fresh.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["shot.png"]


def test_a_replaced_screenshot_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "shot.png"
    target.write_bytes(b"old")
    os.chmod(target, 0o600)
    save_picture(_image(), target)
    assert target.read_bytes().startswith(b"\x89PNG") and stat.S_IMODE(target.stat().st_mode) == 0o600
