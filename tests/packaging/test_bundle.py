"""The PyInstaller bundle in dist/agentdesk, run as a person would: from outside the source tree, with no
Python on PATH and no PYTHONPATH, on a fresh store.

`./dev bundle` builds it; CI (CI=true) builds it first and requires it, elsewhere the tests skip without it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "dist" / "agentdesk"
EXE = BUNDLE / ("agentdesk.exe" if os.name == "nt" else "agentdesk")

pytestmark = pytest.mark.bundle

if not EXE.exists():
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"CI must build the bundle first (./dev bundle): {EXE} is missing")
    pytest.skip("no bundle in dist/agentdesk: build it with ./dev bundle", allow_module_level=True)


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """No Python anywhere: an empty PATH directory, no PYTHONPATH, no virtualenv, a home of its own."""
    empty = home / "empty-bin"
    empty.mkdir(exist_ok=True)
    env = {"PATH": str(empty), "HOME": str(home), "LANG": "C.UTF-8", "AGENTDESK_CONFIG_DIR": str(home / "config")}
    env.update(extra)
    return env


def bundle(home: Path, *args: str, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), *args], cwd=home, env=clean_env(home, **extra), capture_output=True,
                          text=True, timeout=timeout)


def test_the_bundle_holds_files_not_links_and_ships_its_migrations() -> None:
    links = [p for p in BUNDLE.rglob("*") if p.is_symlink() and not p.resolve().is_relative_to(BUNDLE)]
    assert links == []  # the source tree's agentdesk/ symlinks must not leak into the bundle
    internal = BUNDLE / "_internal"
    migrations = internal / "agentdesk" / "store" / "migrations"
    assert (migrations / "env.py").is_file() and sorted(p.name for p in (migrations / "versions").glob("0*.py"))
    assert (internal / "agentdesk" / "resources" / "agentdesk.svg").is_file()
    assert not list(internal.rglob("*QtQml*")) and not list(internal.rglob("*WebEngine*"))
    assert not (internal / "PySide6" / "Qt" / "translations").exists()


def test_version_init_simulate_approvals_and_a_screenshot(tmp_path: Path) -> None:
    from PySide6.QtGui import QImage

    version = bundle(tmp_path, "--version")
    assert version.returncode == 0 and version.stdout.startswith("agentdesk "), version.stderr
    store = str(tmp_path / "store.sqlite")
    init = bundle(tmp_path, "--store", store, "init")
    assert init.returncode == 0 and "Store ready" in init.stdout, init.stderr
    sim = bundle(tmp_path, "--store", store, "simulate", "--duration", "5", "--speed", "20",
                 "--approval-timeout", "600")
    assert sim.returncode == 0 and "Simulation over" in sim.stdout, sim.stderr
    listed = bundle(tmp_path, "--store", store, "approvals", "--json", "--status", "all")
    approvals = json.loads(listed.stdout)
    assert listed.returncode == 0 and approvals and {"id", "status", "tool"} <= set(approvals[0])
    shot = tmp_path / "shot.png"
    gui = bundle(tmp_path, "--store", store, "gui", "--screenshot", str(shot), QT_QPA_PLATFORM="offscreen")
    assert gui.returncode == 0, gui.stderr
    image = QImage(str(shot))
    assert image.width() >= 1000 and image.height() >= 600
    colours = {image.pixel(x, y) for x in range(0, image.width(), 7) for y in range(0, image.height(), 7)}
    assert len(colours) > 50  # text, bars and icons, not one flat fill


def test_without_a_display_the_window_refuses_in_one_sentence(tmp_path: Path) -> None:
    store = str(tmp_path / "store.sqlite")
    assert bundle(tmp_path, "--store", store, "init").returncode == 0
    result = bundle(tmp_path, "--store", store, "gui")  # no DISPLAY, no WAYLAND_DISPLAY, no QT_QPA_PLATFORM
    assert result.returncode == 5 and result.stderr.startswith("agentdesk: No display found:")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
