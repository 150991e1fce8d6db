"""Headless rendering of the window or one view to a PNG, for docs and checks.

Waits until the views have finished loading (the store runner has been idle for
a moment) instead of a fixed sleep, with an upper bound.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Protocol

from PySide6.QtWidgets import QApplication, QWidget

from agentdesk.gui.window.main_window import CONTEXT_TAB, RULES_TAB, TIMELINE_TAB, MainWindow

VIEWS = ("window", "tree", "timeline", "context", "approvals", "rules", "notes")


def settle(window: MainWindow, *, min_s: float = 1.5, quiet_s: float = 0.6, max_s: float = 20.0) -> None:
    """Process events until the runner has been idle for `quiet_s` (at least `min_s`, at most `max_s`)."""
    app = QApplication.instance()
    assert app is not None
    start = time.monotonic()
    quiet_since: float | None = None
    while True:
        app.processEvents()
        now = time.monotonic()
        busy = window.services.runner.in_flight > 0
        quiet_since = None if busy else (quiet_since or now)
        if now - start >= max_s:
            return
        if now - start >= min_s and quiet_since is not None and now - quiet_since >= quiet_s:
            return
        time.sleep(0.01)


def capture(window: MainWindow, view: str, path: str) -> None:
    if view == "context":
        window.tabs.setCurrentIndex(CONTEXT_TAB)
    elif view == "timeline":
        window.tabs.setCurrentIndex(TIMELINE_TAB)
    elif view == "rules":
        window.tabs.setCurrentIndex(RULES_TAB)
    elif view == "notes":  # the window with the Shift notes dock open
        window.tabs.setCurrentIndex(TIMELINE_TAB)
        window.notes.show_shift()
    settle(window, min_s=0.3, quiet_s=0.3)
    if view == "timeline" and (error := window.timeline.feed.error):  # nothing drawn is no screenshot
        raise ViewFailed(error)
    target: QWidget = {"window": window, "tree": window.tree, "timeline": window.timeline,
                       "context": window.context_editor, "approvals": window.queue, "rules": window.rules,
                       "notes": window}[view]
    if not Path(path).parent.is_dir():  # never created here: a mistyped folder must not appear
        raise ScreenshotError(f"Could not write the screenshot to {path}: there is no folder {Path(path).parent}.")
    try:
        save_picture(target.grab(), Path(path))
    except OSError as exc:
        reason = f"Could not write the screenshot to {path}: {exc.strerror}." if exc.errno else str(exc)
        raise ScreenshotError(reason) from exc


class ScreenshotError(Exception):
    """The PNG could not be written: the message names the output, not the store."""


class ViewFailed(ScreenshotError):
    """The view asked for could not load what it shows (the message says why): no PNG is written."""


class Picture(Protocol):
    def save(self, path: str, fmt: str, /) -> bool: ...  # QPixmap.save, QImage.save


def save_picture(picture: Picture, path: Path) -> None:
    """Write `picture` as a PNG at `path`: beside it first, then renamed into place once whole.

    A failed or interrupted write leaves `path` as it was (absent, or the previous screenshot) and no
    temporary behind. A device or named pipe (`/dev/stdout`; the CLI refused anything else that is not a
    regular file) cannot be renamed over and is written directly, as a stream. Raises OSError.
    """
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        special = False
    if special:
        if not picture.save(str(path), "PNG"):
            raise OSError(f"Could not write the screenshot to {path}.")
        return
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part.png", dir=path.parent)
    os.close(fd)
    temp = Path(name)
    try:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)  # a screenshot replaced keeps its mode
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask  # what a new file would get
        os.chmod(temp, mode)
        if not picture.save(str(temp), "PNG"):
            raise OSError(f"Could not write the screenshot to {path}.")
        with open(temp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
