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
# A Python built from source (pyenv, the CI image) ships libpython and its extension modules with debug
# symbols: strip those, and only those (stripping wheels' repaired libraries breaks them).
if [ "$(uname -s)" = Linux ] && command -v strip >/dev/null 2>&1; then
  strip --strip-debug dist/agentdesk/_internal/libpython3*.so* dist/agentdesk/_internal/python3*/lib-dynload/*.so 2>/dev/null || true
fi
echo "built dist/agentdesk in $(( $(date +%s) - start )) s; $(du -sm dist/agentdesk | cut -f1) MB unpacked"
