"""The window at the sizes people have: 1366x768 at 100 % and at 200 % (QT_SCALE_FACTOR=2).

The scale factor is read when QApplication starts, so each size renders in a process of its own, on the
small store of the other view tests; the PNGs are kept under the test's tmp folder for looking at.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from tests.gui.conftest import World

REPO = Path(__file__).resolve().parents[3]
RENDER = """
import json, sys
from PySide6.QtWidgets import QApplication
app = QApplication([])
from agentdesk.gui.window.main_window import MainWindow
from agentdesk.gui.window.screenshot import settle
from agentdesk.model.services import Services
from agentdesk.store.sources import open_source
source = open_source(sys.argv[1])
source.watch()
window = MainWindow(Services.create(source, actor="op"))
window.resize(int(sys.argv[2]), int(sys.argv[3]))
window.show()
QApplication.processEvents()
window.select("run", sys.argv[5])
settle(window, min_s=0.5)
window.grab().save(sys.argv[4])
print(json.dumps({"window": [window.width(), window.height()], "centre": window.tabs.width(),
                  "tree": window.tree_dock.width(), "queue": window.queue_dock.width(),
                  "ratio": window.devicePixelRatio()}))
"""


@pytest.mark.parametrize(("scale", "width", "height"), [("1", 1366, 768), ("2", 1366, 768), ("1", 1920, 1080)])
def test_the_window_fits_and_keeps_the_timeline_readable(world: World, tmp_path: Path, scale: str, width: int,
                                                         height: int) -> None:
    png = tmp_path / f"window-{width}x{height}@{scale}x.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "QT_SCALE_FACTOR": scale, "PYTHONPATH": str(REPO),
           "AGENTDESK_CONFIG_DIR": str(tmp_path / "config")}
    result = subprocess.run([sys.executable, "-c", RENDER, str(world.path), str(width), str(height), str(png),
                             world.run_id], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    facts = json.loads(result.stdout.strip().splitlines()[-1])
    assert facts["window"] == [width, height]  # the docks' minimum widths fit inside the screen
    assert facts["centre"] >= min(800, width - 540) - 16 and facts["tree"] >= 240 and facts["queue"] >= 300
    image = QImage(str(png))
    assert (image.width(), image.height()) == (width * int(scale), height * int(scale))
    colours = {image.pixel(x, y) for x in range(0, image.width(), 9) for y in range(0, image.height(), 9)}
    assert len(colours) > 50
