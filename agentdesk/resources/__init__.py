"""What the app loads at run time (the application icon), found through importlib.resources so it works
from a source tree, an installed wheel and the PyInstaller bundle alike."""

from __future__ import annotations

from importlib.resources import as_file, files
from pathlib import Path

ICON = "agentdesk.svg"


def resource_path(name: str) -> Path:
    """A real file path for `name`: Qt's loaders want a path, not a stream."""
    with as_file(files(__name__) / name) as path:
        return Path(path)
