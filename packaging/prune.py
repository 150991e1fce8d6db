"""Drop shared libraries nothing in the bundle links against any more (used by agentdesk.spec).

Why: PyInstaller collects the dependencies of every binary it analyses, including Qt
plugins and modules the spec then filters out. Removing the GTK3 platform theme
left its GTK stack (cairo, pango, gdk-pixbuf, atk, gio...) in the bundle; leaving
out QtNetwork left its Kerberos libraries. This keeps what is reachable through
DT_NEEDED from the entries Python or Qt load by name (extension modules, Qt
plugins, libpython) and drops the rest. Linux only: the other systems' bundles
were never checked this way, so there it changes nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import PurePath

Entry = tuple[str, str, str]
"""(destination in the bundle, source path or symlink target, PyInstaller typecode)."""


def needed(path: str) -> list[str]:
    """The DT_NEEDED sonames of an ELF file (`readelf -d`); [] when it is not one."""
    result = subprocess.run(["readelf", "-d", path], capture_output=True, text=True)
    return [line.rsplit("[", 1)[1].rstrip("]") for line in result.stdout.splitlines()
            if "(NEEDED)" in line and "[" in line]


def is_root(entry: Entry) -> bool:
    """Loaded by name at run time, not through another binary's DT_NEEDED."""
    dest, _source, kind = entry
    name = PurePath(dest).name
    return kind == "EXTENSION" or "plugins" in PurePath(dest).parts or name.startswith("libpython")


def unreachable(binaries: list[Entry]) -> set[str]:
    """Destinations of the binaries no root reaches through DT_NEEDED."""
    if not sys.platform.startswith("linux") or shutil.which("readelf") is None:
        return set()
    files = [e for e in binaries if e[2] != "SYMLINK"]
    by_name: dict[str, list[Entry]] = {}
    for entry in files:
        by_name.setdefault(PurePath(entry[0]).name, []).append(entry)
    reached: set[str] = set()
    todo = [e for e in files if is_root(e)]
    while todo:
        entry = todo.pop()
        if entry[0] in reached:
            continue
        reached.add(entry[0])
        for soname in needed(entry[1]):
            todo.extend(by_name.get(soname, []))
    return {e[0] for e in files if e[0] not in reached}


def prune(binaries: list[Entry]) -> tuple[list[Entry], list[str]]:
    """The binaries without the unreachable ones (and symlinks pointing at them); and what was dropped."""
    gone = unreachable(binaries)
    kept = [e for e in binaries if e[0] not in gone and not (e[2] == "SYMLINK" and e[1] in gone)]
    return kept, sorted(gone)


OPENSSL = {"libcrypto.so.3": "libcrypto-", "libssl.so.3": "libssl-"}
"""The standard sonames Python's _ssl/_hashlib link against, and the prefix of psycopg-binary's renamed copies."""


def share_openssl(binaries: list[Entry]) -> tuple[list[Entry], list[str]]:
    """Python's libssl/libcrypto replaced by links to psycopg-binary's copies, when both are there (Linux).

    Why it works: the dynamic linker looks `libcrypto.so.3` up by file name, and the link names
    psycopg's file, whose OpenSSL 3.x exports the same versioned symbols (OPENSSL_3.0.0...) the
    interpreter was built against. Checked by tests/packaging (TLS context, HMAC, SHA-3 through it).
    """
    if not sys.platform.startswith("linux"):
        return binaries, []
    vendored = {name: next((e[0] for e in binaries if e[2] != "SYMLINK" and e[0].startswith("psycopg_binary.libs/")
                            and PurePath(e[0]).name.startswith(prefix)), None)
                for name, prefix in OPENSSL.items()}
    if None in vendored.values():
        return binaries, []
    kept = [e for e in binaries if e[0] not in OPENSSL]
    links = [(name, str(target), "SYMLINK") for name, target in vendored.items()]
    return kept + links, sorted(OPENSSL)
