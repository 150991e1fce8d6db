"""Where agentdesk keeps its files on this machine: one answer for the window, the CLI and the store.

Each folder has an environment override so tests, CI and screenshots never touch a person's real ones:
`$AGENTDESK_CONFIG_DIR` (settings, audit keys and anchors; logs under it too), `$AGENTDESK_STATE_DIR`
(crash reports), `$AGENTDESK_STORE` (the default store). Otherwise platformdirs gives each system's place.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "agentdesk"


def config_override() -> Path | None:
    """`$AGENTDESK_CONFIG_DIR` when set: tests and CI pin every config file there (and use no keyring)."""
    value = os.environ.get("AGENTDESK_CONFIG_DIR")
    return Path(value) if value else None


def config_dir() -> Path:
    """Settings, audit keys and anchors: `$AGENTDESK_CONFIG_DIR`, else the user's config directory."""
    return config_override() or Path(platformdirs.user_config_dir(APP, appauthor=False))


def log_dir() -> Path:
    """Crash reports: `$AGENTDESK_STATE_DIR`, else `logs` under a pinned config folder, else the state dir."""
    if os.environ.get("AGENTDESK_STATE_DIR"):
        return Path(os.environ["AGENTDESK_STATE_DIR"])
    pinned = config_override()
    if pinned is not None:
        return pinned / "logs"
    return Path(platformdirs.user_state_dir(APP, appauthor=False)) / "logs"


def default_store_location() -> str:
    """`$AGENTDESK_STORE`, else `agentdesk.sqlite` in the user's data directory."""
    return os.environ.get("AGENTDESK_STORE") or str(Path(platformdirs.user_data_dir(APP, appauthor=False))
                                                    / "agentdesk.sqlite")
