#!/usr/bin/env bash
# Build the one-folder bundle: dist/agentdesk/agentdesk (agentdesk.exe on Windows).
#   packaging/build.sh            uses .venv (made by ./dev) or $PYTHON
# Everything comes from PyPI wheels pinned by constraints.txt; nothing is compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
if [ ! -x "$PY" ] && [ -x .venv/Scripts/python.exe ]; then PY=.venv/Scripts/python.exe; fi
# The app's own dependencies are already in this environment (./dev installs them); add PyInstaller.
"$PY" -m pip install -q -c constraints.txt --only-binary=:all: "pyinstaller>=6.10,<7"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the source tree, whether or not it is installed
start=$(date +%s)
"$PY" -m PyInstaller --noconfirm --clean --log-level WARN \
  --distpath dist --workpath build/pyinstaller packaging/agentdesk.spec
# Debug information (DWARF) is dead weight in a bundle: strip it from libpython, the interpreter's extension
# modules and the wheels' own extension modules (SQLAlchemy, aiohttp, multidict... ship theirs with it: 16 MB).
# Only files without an RPATH/RUNPATH and outside a wheel's `*.libs` folder: those were rewritten by
# auditwheel/patchelf, and stripping them breaks them (numpy's OpenBLAS: "ELF load command ... not page-aligned").
if [ "$(uname -s)" = Linux ] && command -v strip >/dev/null 2>&1 && command -v readelf >/dev/null 2>&1; then
  # The interpreter's own files (a pyenv or CI-built Python ships them with debug symbols and a RUNPATH).
  strip --strip-debug dist/agentdesk/_internal/libpython3*.so* dist/agentdesk/_internal/python3*/lib-dynload/*.so 2>/dev/null || true
  find dist/agentdesk/_internal -type f -name '*.so*' -not -path '*.libs/*' -not -path '*/lib-dynload/*' \
      -not -name 'libpython3*' | while read -r lib; do
    sections=$(readelf -SW "$lib" 2>/dev/null || true)
    dynamic=$(readelf -d "$lib" 2>/dev/null || true)
    case "$sections" in *.debug_*) ;; *) continue ;; esac
    case "$dynamic" in *RPATH*|*RUNPATH*) continue ;; esac
    strip --strip-debug "$lib"
  done
  # ICU's data library, cut down to what Qt reaches here (packaging/slim_icu.py, needs icupkg and cc).
  for icu in dist/agentdesk/_internal/PySide6/Qt/lib/libicudata.so.*; do
    [ -f "$icu" ] && "$PY" packaging/slim_icu.py "$icu"
  done
fi
# PyInstaller links each Qt library into _internal/ by its soname; the libraries agentdesk.spec left out
# (nothing links against them) leave those links pointing at nothing: drop them.
find dist/agentdesk -xtype l -delete
echo "built dist/agentdesk in $(( $(date +%s) - start )) s; $(du -sm dist/agentdesk | cut -f1) MB unpacked"
