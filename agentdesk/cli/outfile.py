"""Where a command writes its output (`export -o`, `audit export -o`): never replacing what it does not own.

- a regular file, or nothing yet: written beside it (a temporary in the same folder) and renamed into
  place once whole, so an interrupted export never leaves half a file and a reader never sees one;
- a character device, a FIFO or a socket (`/dev/null`, `/dev/stdout`, a named pipe): written to directly,
  as a stream; it is never replaced by a regular file (as root, a rename over `/dev/full` replaced it);
- a folder: refused, naming the output;
- a symbolic link: followed only to a device, FIFO or socket (`/dev/stdout` is a link); a link to a regular
  file or to nothing is refused, so neither the link nor what it points to is ever replaced.

Every refusal and every write failure is one sentence naming the output (exit 2), never "the store could
not be used".
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from agentdesk.store.errors import InvalidInput

STREAMED = (stat.S_ISCHR, stat.S_ISFIFO, stat.S_ISSOCK)


class OutputRefused(InvalidInput):
    """The output path cannot be written as asked; the sentence names it."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


def _streamed(mode: int) -> bool:
    return any(test(mode) for test in STREAMED)


def plan(path: Path) -> str:
    """"stream" or "replace" for `path`, or `OutputRefused` saying why neither is safe."""
    try:
        link = os.lstat(path)
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise OutputRefused(f"The output {path} cannot be written: its folder {path.parent} does not "
                                "exist.") from None
        return "replace"
    except OSError as exc:
        raise OutputRefused(f"The output {path} cannot be written: {exc.strerror or exc}.") from None
    if stat.S_ISLNK(link.st_mode):
        try:
            target = os.stat(path)
        except OSError:
            raise OutputRefused(f"The output {path} is a symbolic link to nothing; name the file itself, "
                                "not a link.") from None
        if _streamed(target.st_mode):
            return "stream"
        raise OutputRefused(f"The output {path} is a symbolic link to {_kind(target.st_mode)} "
                            f"({os.path.realpath(path)}); name the file itself, so nothing a link points to "
                            "is replaced.")
    if stat.S_ISREG(link.st_mode):
        return "replace"
    if _streamed(link.st_mode):
        return "stream"
    raise OutputRefused(f"The output {path} is {_kind(link.st_mode)}; name a file"
                        + (" inside it." if stat.S_ISDIR(link.st_mode) else " instead."))


def check_picture_output(path: Path) -> None:
    """For outputs written by a library that opens the path itself (a screenshot saved by Qt): the same
    refusals, before it starts, and a named pipe only with a reader (Qt's open would wait for one)."""
    if not path.parent.exists():
        return  # the screenshot makes its folder
    if plan(path) != "stream" or not stat.S_ISFIFO(os.stat(path).st_mode):
        return
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OutputRefused(f"The output {path} is a named pipe nobody is reading; start its reader "
                                "first.") from None
        raise _failed(path, exc) from None
    os.close(fd)


def _failed(path: Path, exc: OSError) -> OutputRefused:
    return OutputRefused(f"The output {path} could not be written: {exc.strerror or exc}.")


def _same_file(path: Path, other: Path) -> bool:
    try:
        a, b = os.stat(path), os.stat(other)
    except (OSError, ValueError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


@contextlib.contextmanager
def output_file(path: Path, *, protect: Path | None = None, private: bool = False) -> Iterator[TextIO]:
    """A text stream for `path` as the module's rules say; the file is in place when the block ends
    without an error, and nothing of it is left when the block raises. `protect`: the store being read,
    which (nor its WAL) is never the output. `private`: a regular file is written `0600` whatever the
    umask or an existing file's mode (an exported audit key)."""
    if protect is not None and any(_same_file(path, protect.with_name(protect.name + suffix))
                                   for suffix in ("", "-wal", "-shm", "-journal")):
        raise OutputRefused(f"The output {path} is the store itself ({protect}); name another file.")
    how = plan(path)
    if how == "stream":
        try:  # non-blocking: a named pipe nobody reads is refused at once instead of waiting for ever
            fd = os.open(path, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                raise OutputRefused(f"The output {path} is a named pipe nobody is reading; start its reader "
                                    "first.") from None
            raise _failed(path, exc) from None
        if hasattr(os, "set_blocking"):  # Unix; elsewhere the open was blocking already
            os.set_blocking(fd, True)
        handle = open(fd, "w", encoding="utf-8")  # noqa: SIM115 - closed below; a device is not truncated
        try:
            yield handle
            handle.flush()
        except OSError as exc:
            raise _failed(path, exc) from None
        finally:
            with contextlib.suppress(OSError):
                handle.close()
        return
    yield from _replace(path, private)


def _replace(path: Path, private: bool = False) -> Iterator[TextIO]:
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    except OSError as exc:
        raise _failed(path, exc) from None
    temp = Path(name)
    umask = os.umask(0)
    os.umask(umask)
    with contextlib.suppress(OSError):
        os.chmod(temp, 0o600 if private else 0o666 & ~umask)  # what a new file would get; an existing
        # file's mode is kept below (never for a private one)
    done = False
    try:
        with open(fd, "w", encoding="utf-8") as handle:
            try:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            except OSError as exc:
                raise _failed(path, exc) from None
        with contextlib.suppress(FileNotFoundError):
            before = os.lstat(path)
            if not stat.S_ISREG(before.st_mode):  # something else appeared there meanwhile: leave it be
                raise OutputRefused(f"The output {path} became {_kind(before.st_mode)} while it was written; "
                                    "nothing was replaced.")
            if not private:
                with contextlib.suppress(OSError):
                    os.chmod(temp, stat.S_IMODE(before.st_mode))
        try:
            os.replace(temp, path)
        except OSError as exc:
            raise _failed(path, exc) from None
        done = True
    finally:
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(temp)
