"""The command line's last resort: an unexpected error becomes one sentence, exit 5, and a log file.

Every failure agentdesk expects has its own sentence and exit code (README). Anything else (a bug,
input nobody foresaw) must still not print a traceback at the operator: the traceback goes to a
file under the user's state directory, and the sentence names the file so it can be attached to
a report. `$AGENTDESK_STATE_DIR` overrides the directory (tests); else `$AGENTDESK_CONFIG_DIR/logs`
when that is set (as the window's settings honour it), else platformdirs' user state directory.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from datetime import UTC, datetime
from pathlib import Path

from agentdesk.store.paths import log_dir

EXIT_UNEXPECTED = 5


def save_traceback(exc: BaseException, argv: list[str]) -> Path:
    """Write the full report to a new file and return its path (OSError when it cannot be written)."""
    folder = log_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = folder / f"crash-{stamp}-{os.getpid()}.log"
    report = "".join(traceback.format_exception(exc))
    with path.open("w", encoding="utf-8", errors="backslashreplace") as handle:
        handle.write(f"agentdesk {' '.join(argv)}\n{report}")
    return path


def summary(exc: BaseException) -> str:
    """The error's kind and the first line of its message, short (RecursionError messages are long)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    text = text if len(text) <= 160 else text[:159] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def unexpected(exc: BaseException) -> str:
    """The one sentence for an unexpected error; the traceback is saved first."""
    argv = sys.argv[1:]
    try:
        where = f"the full report is in {save_traceback(exc, argv)}"
    except OSError as failure:
        where = f"its report could not be saved ({failure.strerror or failure})"
    return f"The command stopped on an unexpected error ({summary(exc)}); {where}."


def printable_streams() -> None:
    """Text the terminal cannot encode (a lone surrogate from valid JSON, odd bytes) is written as an
    escape instead of ending the command with UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
