"""The PyInstaller bundle in dist/agentdesk, run as a person would: from outside the source tree, with no
Python on PATH and no PYTHONPATH, on a fresh store.

`./dev bundle` builds it; CI (CI=true) builds it first and requires it, elsewhere the tests skip without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
    assert links == []  # no link may point out of the bundle
    dangling = [p for p in BUNDLE.rglob("*") if p.is_symlink() and not p.exists()]
    assert dangling == []  # nor at a library that was left out
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


# -- what was cut to reach the size target (packaging/README.md, "Size") ------------------------------------
MAX_MB = 155
"""150 MB until the model price table (genai-prices, issue 22) brought pydantic: pydantic-core is 4.8 MB."""


def test_the_bundle_is_at_most_155_mb_unpacked() -> None:
    size = sum(p.stat().st_size for p in BUNDLE.rglob("*") if p.is_file() and not p.is_symlink())
    assert size / 2**20 <= MAX_MB, f"the bundle is {size / 2**20:.0f} MB unpacked"


ICU_CHECK = r"""
import ctypes
from PySide6.QtCore import QCollator, QDateTime, QLibraryInfo, QLocale, QStringDecoder, QTimeZone
collator = QCollator(QLocale("en_US"))
print(sorted(["zebra", "Äpfel", "apple", "Zoo", "éclair", "eagle"], key=collator.sortKey))
collator.setNumericMode(True)
print(sorted(["file10", "file9", "file1"], key=collator.sortKey))
print([QStringDecoder(n).isValid() for n in ("windows-1252", "ISO-8859-2", "KOI8-R", "windows-1251")])
print(QLocale("tr_TR").toUpper("istanbul"), QLocale("en_US").toUpper("straße"))
print(QTimeZone(b"Europe/Paris").displayName(QDateTime(2026, 1, 15, 12, 0, 0), QTimeZone.NameType.LongName,
                                             QLocale("en_US")))
icu = ctypes.CDLL(QLibraryInfo.path(QLibraryInfo.LibraryPath.LibrariesPath) + "/libicuuc.so.{v}")
icu.ucnv_open_{v}.restype = ctypes.c_void_p
for name, raw in ((b"windows-1252", b"\x80 caf\xe9"), (b"ISO-8859-2", b"\xa3\xf3d\xbc"), (b"KOI8-R", b"\xf0\xd2\xc9")):
    err = ctypes.c_int(0)
    conv = icu.ucnv_open_{v}(name, ctypes.byref(err))
    out = (ctypes.c_uint16 * 64)()
    n = icu.ucnv_toUChars_{v}(ctypes.c_void_p(conv), out, 64, raw, len(raw), ctypes.byref(err))
    print(name.decode(), bytes(out)[: 2 * n].decode("utf-16-le") if err.value <= 0 else f"error {err.value}")
"""
ICU_EXPECTED = """['Äpfel', 'apple', 'eagle', 'éclair', 'zebra', 'Zoo']
['file1', 'file9', 'file10']
[True, True, True, True]
İSTANBUL STRASSE
Central European Standard Time
windows-1252 € café
ISO-8859-2 Łódź
KOI8-R При
"""


@pytest.mark.skipif(not (BUNDLE / "_internal" / "PySide6" / "Qt" / "lib").is_dir(), reason="Linux bundle layout")
def test_qt_still_collates_converts_and_upper_cases_with_the_bundles_slim_icu_data() -> None:
    """Qt (the test environment's, same version) with the bundle's cut-down libicudata preloaded in its place."""
    data = sorted((BUNDLE / "_internal" / "PySide6" / "Qt" / "lib").glob("libicudata.so.*"))
    assert data and data[0].stat().st_size < 8 * 2**20, "the ICU data library was not slimmed"
    version = data[0].name.rsplit(".", 1)[1]
    env = {**os.environ, "LD_PRELOAD": str(data[0]), "QT_QPA_PLATFORM": "offscreen", "LANG": "C.UTF-8"}
    done = subprocess.run([sys.executable, "-c", ICU_CHECK.replace("{v}", version)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ICU_EXPECTED


SSL_CHECK = """
import hashlib, hmac, ssl
context = ssl.create_default_context()
print(ssl.OPENSSL_VERSION.split()[0], context.verify_mode == ssl.CERT_REQUIRED)
print(hmac.new(b"key", b"record", "sha256").hexdigest()[:16], hashlib.sha3_256(b"x").hexdigest()[:8])
"""


@pytest.mark.skipif(not (BUNDLE / "_internal" / "libcrypto.so.3").is_symlink(), reason="OpenSSL not shared")
def test_pythons_ssl_and_hashlib_work_on_psycopgs_openssl() -> None:
    """The bundle's libssl.so.3/libcrypto.so.3 are links to psycopg-binary's copies: Python's _ssl and _hashlib
    (the same interpreter build the bundle holds) load and work through them."""
    internal = BUNDLE / "_internal"
    assert (internal / "libcrypto.so.3").resolve().parent.name == "psycopg_binary.libs"
    env = {**os.environ, "LD_LIBRARY_PATH": str(internal), "LD_DEBUG": "libs"}
    done = subprocess.run([sys.executable, "-c", SSL_CHECK], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["OpenSSL True", f"{hmac_sha256('key', 'record')[:16]} "
                                        f"{__import__('hashlib').sha3_256(b'x').hexdigest()[:8]}"]
    loaded = [line for line in done.stderr.splitlines() if "calling init:" in line and "libcrypto" in line]
    assert loaded and all(str(internal) in line for line in loaded), loaded  # the bundle's, not the system's


def hmac_sha256(key: str, message: str) -> str:
    import hashlib
    import hmac
    return hmac.new(key.encode(), message.encode(), hashlib.sha256).hexdigest()
