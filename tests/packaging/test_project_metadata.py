"""pyproject.toml names only files that exist, and the version has one source."""

from __future__ import annotations

import tomllib
from pathlib import Path

from agentdesk import __version__

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_data_pattern_matches_a_file() -> None:
    for package, patterns in PROJECT["tool"]["setuptools"]["package-data"].items():
        folder = REPO.joinpath(*package.split("."))
        for pattern in patterns:
            assert list(folder.glob(pattern)), f"{package}: {pattern} matches nothing"


def test_the_version_comes_from_the_package() -> None:
    assert PROJECT["project"]["dynamic"] == ["version"]
    assert PROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "agentdesk.__version__"}
    assert __version__.count(".") == 2


def test_license_and_the_files_packaging_needs_exist() -> None:
    assert "Apache License" in (REPO / "LICENSE").read_text(encoding="utf-8")[:200]
    for name in ("packaging/build.sh", "packaging/agentdesk.spec", "packaging/agentdesk.desktop",
                 "agentdesk/resources/agentdesk.svg", "constraints.txt"):
        assert (REPO / name).is_file(), name
    pins = [line for line in (REPO / "constraints.txt").read_text().splitlines() if line and line[0] != "#"]
    assert pins and all("==" in line for line in pins)
