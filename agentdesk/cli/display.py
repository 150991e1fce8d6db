"""Can a window open here? Asked before Qt starts, because Qt's own answer is an abort.

With no display, or with a library its xcb platform plugin links against missing,
Qt prints a message naming the wrong library (or none) and aborts the process
(exit 134). This module answers the same questions first, in one sentence, with
the exact packages to install. Qt-free: it only looks at the environment, at
sockets and at which shared libraries the dynamic loader can find.
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

NO_DISPLAY = ("No display found: run under a desktop session, `xvfb-run ./dev demo`, or take a screenshot "
              "with `agentdesk gui --screenshot out.png`.")
HEADLESS_PLATFORMS = frozenset({"offscreen", "minimal", "vnc", "eglfs", "linuxfb", "vkkhrdisplay"})


@dataclass(frozen=True)
class XcbLibrary:
    soname: str
    debian: str
    fedora: str


XCB_LIBRARIES = (
    # What Qt 6's libqxcb.so and libQt6XcbQpa.so link against (readelf -d, NEEDED), beyond Qt itself and libc.
    XcbLibrary("libxcb.so.1", "libxcb1", "libxcb"),
    XcbLibrary("libxcb-cursor.so.0", "libxcb-cursor0", "xcb-util-cursor"),
    XcbLibrary("libxcb-icccm.so.4", "libxcb-icccm4", "xcb-util-wm"),
    XcbLibrary("libxcb-image.so.0", "libxcb-image0", "xcb-util-image"),
    XcbLibrary("libxcb-keysyms.so.1", "libxcb-keysyms1", "xcb-util-keysyms"),
    XcbLibrary("libxcb-randr.so.0", "libxcb-randr0", "libxcb"),
    XcbLibrary("libxcb-render.so.0", "libxcb-render0", "libxcb"),
    XcbLibrary("libxcb-render-util.so.0", "libxcb-render-util0", "xcb-util-renderutil"),
    XcbLibrary("libxcb-shape.so.0", "libxcb-shape0", "libxcb"),
    XcbLibrary("libxcb-shm.so.0", "libxcb-shm0", "libxcb"),
    XcbLibrary("libxcb-sync.so.1", "libxcb-sync1", "libxcb"),
    XcbLibrary("libxcb-util.so.1", "libxcb-util1", "xcb-util"),
    XcbLibrary("libxcb-xfixes.so.0", "libxcb-xfixes0", "libxcb"),
    XcbLibrary("libxcb-xkb.so.1", "libxcb-xkb1", "libxcb"),
    XcbLibrary("libX11.so.6", "libx11-6", "libX11"),
    XcbLibrary("libX11-xcb.so.1", "libx11-xcb1", "libX11-xcb"),
    XcbLibrary("libxkbcommon.so.0", "libxkbcommon0", "libxkbcommon"),
    XcbLibrary("libxkbcommon-x11.so.0", "libxkbcommon-x11-0", "libxkbcommon-x11"),
    XcbLibrary("libGL.so.1", "libgl1", "libglvnd-glx"),
    XcbLibrary("libEGL.so.1", "libegl1", "libglvnd-egl"),
    XcbLibrary("libfontconfig.so.1", "libfontconfig1", "fontconfig"),
    XcbLibrary("libglib-2.0.so.0", "libglib2.0-0", "glib2"),
)


def x_server_reachable(display: str) -> bool:
    """Only a local display (`:0`, `unix:0`) is probed, through its socket; a remote one is trusted."""
    host, _, rest = display.rpartition(":")
    if host not in ("", "unix"):
        return True
    number = rest.split(".", 1)[0]
    if not number.isdigit():
        return False
    path = f"/tmp/.X11-unix/X{number}"
    sockets = [path]
    if sys.platform.startswith("linux"):
        sockets.insert(0, "\0" + path)  # the abstract socket most X servers also listen on
    for address in sockets:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            try:
                probe.connect(address)
            except OSError:
                continue
            return True
    return False


def loadable(soname: str, bundled: Path | None) -> bool:
    if bundled is not None and (bundled / soname).exists():
        return True
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def missing_xcb_libraries() -> list[XcbLibrary]:
    """The libraries the xcb plugin needs that the loader cannot find (a bundle's own copies count)."""
    frozen = getattr(sys, "_MEIPASS", None)
    bundled = Path(frozen) if frozen else None
    return [lib for lib in XCB_LIBRARIES if not loadable(lib.soname, bundled)]


def install_sentence(missing: list[XcbLibrary]) -> str:
    debian = " ".join(dict.fromkeys(lib.debian for lib in missing))
    fedora = " ".join(dict.fromkeys(lib.fedora for lib in missing))
    sonames = [lib.soname for lib in missing]
    names = sonames[0] if len(sonames) == 1 else ", ".join(sonames[:-1]) + " and " + sonames[-1]
    return (f"The window cannot start: Qt's xcb platform plugin needs {names}, which this system lacks; "
            f"install them with `sudo apt-get install {debian}` (Debian/Ubuntu) or `sudo dnf install {fedora}` "
            f"(Fedora).")


def display_problem(environ: dict[str, str] | None = None, *, platform: str = sys.platform) -> str | None:
    """Why a window cannot open here, as one sentence, or None when it (probably) can.

    Only Linux and the BSDs are checked: macOS and Windows always have their platform plugin.
    """
    env = os.environ if environ is None else environ
    if not (platform.startswith("linux") or "bsd" in platform):
        return None
    chosen = env.get("QT_QPA_PLATFORM", "").split(":", 1)[0].split(";", 1)[0].strip()
    if chosen in HEADLESS_PLATFORMS:
        return None
    display = env.get("DISPLAY", "")
    if chosen.startswith("wayland") or (not chosen and not display and env.get("WAYLAND_DISPLAY")):
        return None  # Qt's Wayland plugin, where installed, needs none of the xcb libraries
    if not display or not x_server_reachable(display):
        return NO_DISPLAY
    missing = missing_xcb_libraries()
    return install_sentence(missing) if missing else None
