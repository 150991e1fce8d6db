"""Where the window keeps its layout, last selection and the operator's name.

An INI file in the user's config directory (platformdirs), overridable with
$AGENTDESK_CONFIG_DIR so tests and screenshots never touch the real one.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
from PySide6.QtCore import QSettings


def settings_path() -> Path:
    base = os.environ.get("AGENTDESK_CONFIG_DIR") or platformdirs.user_config_dir("agentdesk", appauthor=False)
    return Path(base) / "agentdesk.ini"


def open_settings() -> QSettings:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return QSettings(str(path), QSettings.Format.IniFormat)


def read_str(settings: QSettings, key: str, default: str = "") -> str:
    value = settings.value(key, default)
    return value if isinstance(value, str) else default
