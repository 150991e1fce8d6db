"""What `agentdesk --version` says besides the number: which install this is and where it lives, so a
report ("0.1.0") names the bundle, the pipx venv or the checkout it came from."""

from __future__ import annotations

import sys
from pathlib import Path

import agentdesk
from agentdesk.store.ingest.prices import price_table


def install_kind(package: Path | None = None, *, frozen: bool | None = None, prefix: str | None = None,
                 base_prefix: str | None = None) -> tuple[str, Path]:
    """(kind, place): "bundle", "pipx", "checkout" (run from the source tree), "virtualenv" or "system"."""
    package = package or Path(agentdesk.__file__).resolve().parent
    frozen = bool(getattr(sys, "frozen", False)) if frozen is None else frozen
    prefix = sys.prefix if prefix is None else prefix
    base_prefix = sys.base_prefix if base_prefix is None else base_prefix
    if frozen:
        return "bundle", Path(sys.executable).resolve().parent
    if "site-packages" not in package.parts and "dist-packages" not in package.parts:
        return "checkout", package.parent
    if "pipx" in Path(prefix).parts:
        return "pipx", Path(prefix)
    if prefix != base_prefix:
        return "virtualenv", Path(prefix)
    return "system", Path(prefix)


def version_line(version: str) -> str:
    kind, place = install_kind()
    return f"agentdesk {version} ({kind}: {place}); model prices: {price_table()}"
