"""Where the window keeps its layout, last selection and the operator's name.

An INI file in the user's config directory (platformdirs), overridable with
$AGENTDESK_CONFIG_DIR so tests and screenshots never touch the real one.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings

from agentdesk.store.paths import config_dir


def settings_path() -> Path:
    return config_dir() / "agentdesk.ini"


def open_settings() -> QSettings:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return QSettings(str(path), QSettings.Format.IniFormat)


def read_str(settings: QSettings, key: str, default: str = "") -> str:
    value = settings.value(key, default)
    return value if isinstance(value, str) else default
