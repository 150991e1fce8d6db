"""Replace the bundle's 31 MB ICU data library with one holding only what Qt can reach in agentdesk.

Why: the PyPI Qt links ICU, and ICU's data library (`libicudata.so.NN`) holds every
locale's collation, break dictionaries, transliterators and CJK converters: a
seventh of the bundle. Qt uses ICU for collation (QCollator: the file dialog sorts
with it), for codecs beyond its built-in UTF-8/16/32 and Latin-1 (QStringConverter),
for locale-aware case mapping and for time-zone display names. agentdesk's text is
UTF-8 and its UI English, so those needs are the root and English locale data, the
Unicode property and normalisation tables, the root collation, the time-zone tables,
and the small single-byte converters (windows-125x, ISO-8859-x and the like).

How: the library is one ICU "common data" package in the symbol `icudtNN_dat`. It is
cut out of the ELF file, filtered with ICU's own `icupkg` (Debian: icu-devtools), and
linked back into a data-only shared library with the same soname and symbol
(`.incbin` in an assembler file, `cc -shared`). Linux only (macOS and Windows Qt use
the system's ICU); when icupkg or a C compiler is missing the full library stays and
this says so. tests/packaging checks that Qt still collates, converts and upper-cases
with the slim data (packaging/README.md lists what is removed).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

KEEP_LOCALES = re.compile(r"^(root|en|en_[A-Za-z0-9_]+|pool|res_index)\.res$")
"""Per-locale resources kept in every tree: the root, English and the trees' shared pools and indexes."""
DROP_TREES = ("translit/", "rbnf/")
"""Transliteration and rule-based number spelling: no Qt API reaches them."""
MAX_CONVERTER_BYTES = 8 * 1024
"""Single-byte code pages are 1-4 KB; the CJK multi-byte tables (100-550 KB each) are dropped."""


def keep(item: str, size: int) -> bool:
    """Whether an item of the ICU data package stays (item names as `icupkg -l` prints them)."""
    name = item.rpartition("/")[2]
    if any(item.startswith(t) for t in DROP_TREES):
        return False
    if name.endswith(".dict"):
        return False  # CJK, Thai, Khmer, Lao, Burmese word-break dictionaries (3 MB)
    if name.endswith(".cnv"):
        return size <= MAX_CONVERTER_BYTES
    if name.endswith(".res") and _is_locale(name):
        return bool(KEEP_LOCALES.match(name))
    return True  # property, normalisation, collation base (ucadata.icu), alias and supplemental tables


LOCALE_NAME = re.compile(r"^(root|[a-z]{2,3}(_[A-Za-z0-9]*)*)\.res$")
"""`de_CH.res`, `zh_Hant_TW.res`, `de__PHONEBOOK.res`, `root.res`; not `supplementalData.res`, `zoneinfo64.res`."""


def _is_locale(name: str) -> bool:
    return bool(LOCALE_NAME.match(name))


def _symbol(library: Path) -> tuple[str, int, int]:
    """(name, file offset, size) of the `icudtNN_dat` symbol."""
    out = subprocess.run(["nm", "-D", "-S", str(library)], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and re.fullmatch(r"icudt\d+_dat", parts[3]):
            address, size, name = int(parts[0], 16), int(parts[1], 16), parts[3]
            break
    else:
        raise SystemExit(f"{library} exports no icudtNN_dat symbol")
    sections = subprocess.run(["readelf", "-SW", str(library)], check=True, capture_output=True, text=True).stdout
    for line in sections.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) > 5 and fields[1] == ".rodata":
            section_address, section_offset = int(fields[3], 16), int(fields[4], 16)
            return name, address - section_address + section_offset, size
    raise SystemExit(f"{library} has no .rodata section")


DEPENDS = re.compile(r"Item (\S+) depends on missing item (\S+)")


def _remove(full: Path, out: Path, dropped: list[str], listing: Path) -> list[str]:
    """`icupkg -r`, following dependencies: a converter that extends a dropped base table goes too.

    The one dependency left on purpose is the break rules' reference to the dropped word
    dictionaries (ICU loads them only to segment CJK and South-East Asian text, which Qt does
    not ask ICU for): icupkg is told to ignore that one, and only that one.
    """
    drop = set(dropped)
    for _ in range(5):
        listing.write_text("\n".join(sorted(drop)) + "\n")
        missing = subprocess.run(["icupkg", "-r", str(listing), str(full), str(out)], capture_output=True, text=True)
        if missing.returncode == 0:
            return sorted(drop)
        pairs = DEPENDS.findall(missing.stderr)
        followers = {item for item, needed in pairs if item.endswith(".cnv")}
        if followers - drop:
            drop |= followers
            continue
        if pairs and all(needed.endswith(".dict") for _, needed in pairs):
            subprocess.run(["icupkg", "--ignore-deps", "-r", str(listing), str(full), str(out)], check=True,
                           capture_output=True)
            return sorted(drop)
        break
    raise SystemExit(f"slim_icu: icupkg refused the filter:\n{missing.stderr[-2000:]}")


def slim(library: Path) -> tuple[int, int]:
    """Rewrite `library` in place; returns (bytes before, bytes after)."""
    tools = {tool: shutil.which(tool) for tool in ("icupkg", "cc", "nm", "readelf")}
    missing = [tool for tool, found in tools.items() if found is None]
    if missing:
        print(f"slim_icu: {', '.join(missing)} not found (Debian: apt-get install icu-devtools gcc binutils); "
              f"keeping the full ICU data ({library.stat().st_size // 2**20} MB)")
        return library.stat().st_size, library.stat().st_size
    soname = library.name
    symbol, offset, size = _symbol(library)
    before = library.stat().st_size
    with tempfile.TemporaryDirectory(prefix="agentdesk-icu-") as tmp:
        work = Path(tmp)
        package = f"{symbol.removesuffix('_dat')}l"  # little-endian common data, as Linux ships it
        full = work / f"{package}.dat"
        with library.open("rb") as f:
            f.seek(offset)
            full.write_bytes(f.read(size))
        listing = subprocess.run(["icupkg", "-l", str(full)], check=True, capture_output=True, text=True).stdout
        items = [line.strip() for line in listing.splitlines() if line.strip()]
        extracted = work / "items"
        extracted.mkdir()
        subprocess.run(["icupkg", "-x", "*", "-d", str(extracted), str(full)], check=True, capture_output=True)
        dropped = [item for item in items if not keep(item, (extracted / item).stat().st_size)]
        slim_dat = work / "slim" / full.name  # icupkg names the entries after the output file: icudtNNl/...
        slim_dat.parent.mkdir()
        dropped = _remove(full, slim_dat, dropped, work / "drop.txt")
        assembly = work / "icudata.S"
        assembly.write_text(
            "\t.section .rodata\n"
            f"\t.globl {symbol}\n\t.type {symbol}, @object\n\t.balign 16\n"
            f"{symbol}:\n\t.incbin \"{slim_dat}\"\n\t.size {symbol}, . - {symbol}\n"
            "\t.section .note.GNU-stack,\"\",@progbits\n")
        built = work / soname
        subprocess.run(["cc", "-shared", "-nostdlib", f"-Wl,-soname,{soname}", "-Wl,-z,noexecstack",
                        "-o", str(built), str(assembly)], check=True)
        shutil.copyfile(built, library)
        print(f"slim_icu: {len(items) - len(dropped)} of {len(items)} ICU data items kept; "
              f"{library.name} {before / 2**20:.1f} MB -> {library.stat().st_size / 2**20:.1f} MB")
    return before, library.stat().st_size


if __name__ == "__main__":
    if not sys.platform.startswith("linux"):
        print("slim_icu: nothing to do (only Linux bundles carry ICU's data library)")
        raise SystemExit(0)
    for path in sys.argv[1:]:
        slim(Path(path))
