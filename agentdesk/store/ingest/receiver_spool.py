"""The receiver's write-ahead spool: a request is acknowledged once its body is on disk, fsynced.

Why: answering only after the store's commit made every exporter wait for a
transaction, and an SDK producing faster than that overflowed its own queue and
dropped spans. Now a request's body (decoded and validated first, so a bad body
still gets its 400) is appended here and fsynced, then answered 200; the
receiver's writer drains the spool into the store in large batches.

On disk, beside the store (`<store>-spool/`, mode 0700: it holds what the store
holds) or under the config folder for a PostgreSQL store:

    <root>/<instance>/lock          flock held while its receiver runs
    <root>/<instance>/NNNNNNNNNN.otlp  segments of records
    <root>/<instance>/drained       "segment offset": everything before it is in the store
    <root>/rejected.otlp            records the store refused after they were acknowledged

A record is `ADSP`, its length, its CRC-32, its kind (traces or logs) and media
(JSON or protobuf), then the body as received (inflated). Several waiting
requests share one write and one fsync (`GroupCommit`). A receiver that starts
*adopts* every instance folder whose lock nobody holds (a receiver killed before
its writer drained it) and replays it: ingest is idempotent on trace id + span
id, so a record that was stored already adds nothing; the checkpoint only saves
the work. The torn tail of a record being written when the process died was
never acknowledged, and is skipped.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import struct
import sys
import threading
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger(__name__)

MAGIC = b"ADSP"
HEADER = struct.Struct("<4sIIBB")
"""magic, body length, CRC-32 of the body, kind, media."""
TRACES, LOGS = 1, 2
JSON, PROTOBUF = 1, 2
SEGMENT_BYTES = 16 * 1024 * 1024
"""A fully drained segment is deleted; replay after a crash re-reads at most what the checkpoint missed."""
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""Bytes acknowledged but not yet in the store before new requests get 429: about 10 s of writing."""
SUFFIX = ".otlp"


class SpoolFull(Exception):
    """The writer is this far behind: refuse (429 + Retry-After), never grow without limit."""


@dataclass(frozen=True, slots=True)
class Record:
    kind: int
    media: int
    body: bytes

    @property
    def size(self) -> int:
        return HEADER.size + len(self.body)

    def encoded(self) -> bytes:
        return HEADER.pack(MAGIC, len(self.body), zlib.crc32(self.body), self.kind, self.media) + self.body


@dataclass(frozen=True, order=True, slots=True)
class Position:
    """Where a record ends: segment number and the offset just past it."""

    segment: int
    end: int


def _fsync(fd: int) -> None:
    if sys.platform == "darwin":  # macOS's fsync leaves the drive's cache unflushed
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_FULLFSYNC", 51))
    elif hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:
        os.fsync(fd)


def _fsync_dir(path: Path) -> None:
    """A new file's name is durable once its folder is synced (POSIX; Windows has no folder handles)."""
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _try_lock(path: Path) -> int | None:
    """An exclusive lock on `path`, held as long as the returned descriptor is open; None when taken."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.name == "posix":
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:  # pragma: no cover - Windows
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
    except OSError:
        os.close(fd)
        return None
    return fd


def default_root(store_path: Path | None, url: str, config: Path) -> Path:
    """Beside a store file (`<store>-spool`, like its other companions); for a server, under the config folder."""
    if store_path is not None:
        return store_path.with_name(store_path.name + "-spool")
    safe = url.split("@", 1)[-1]  # no password in what is hashed
    return config / "spool" / hashlib.sha256(safe.encode()).hexdigest()[:16]


def read_records(path: Path, start: int = 0) -> Iterator[tuple[Record, int]]:
    """Each whole record of a segment from `start`, with the offset just past it; stops at a torn tail."""
    with open(path, "rb") as f:
        f.seek(start)
        offset = start
        while True:
            record = _read_one(f)
            if record is None:
                return
            offset += record.size
            yield record, offset


def _read_one(f: BinaryIO) -> Record | None:
    head = f.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    magic, length, crc, kind, media = HEADER.unpack(head)
    if magic != MAGIC:
        return None
    body = f.read(length)
    if len(body) < length or zlib.crc32(body) != crc:
        return None
    return Record(kind, media, body)


class Adopted:
    """The spool of a receiver that is gone: its records from the checkpoint on, then removed."""

    def __init__(self, folder: Path, lock_fd: int) -> None:
        self.folder = folder
        self._lock_fd = lock_fd

    def records(self) -> Iterator[tuple[Record, Position]]:
        start = _checkpoint(self.folder)
        for segment in _segments(self.folder):
            if segment < start.segment:
                continue
            path = self.folder / _segment_name(segment)
            offset = start.end if segment == start.segment else 0
            for record, end in read_records(path, offset):
                yield record, Position(segment, end)

    def drained(self, position: Position) -> None:
        _write_checkpoint(self.folder, position)

    def remove(self) -> None:
        """Unlocked first (Windows deletes no open file); a receiver adopting it meanwhile replays nothing new."""
        os.close(self._lock_fd)
        shutil.rmtree(self.folder, ignore_errors=True)


class Spool:
    """This receiver's own folder: appends (with fsync), the drained checkpoint, the bound."""

    def __init__(self, root: Path, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 segment_bytes: int = SEGMENT_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._segment_bytes = segment_bytes
        self.folder = root / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._lock = threading.Lock()
        self._pending = 0
        self._lock_fd: int | None = None
        self._fd: int | None = None
        self._segment = 0
        self._size = 0
        self._drained = Position(1, 0)

    @property
    def pending_bytes(self) -> int:
        """Acknowledged (or about to be) and not yet in the store."""
        with self._lock:
            return self._pending

    def open(self) -> list[Adopted]:
        """Make this receiver's folder and lock it; returns the folders of receivers that are gone."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        adopted = self._orphans()
        self.folder.mkdir(mode=0o700)
        self._lock_fd = _try_lock(self.folder / "lock")
        if self._lock_fd is None:
            raise OSError(f"Cannot lock the receiver's spool folder {self.folder}.")
        self._next_segment()
        return adopted

    def _orphans(self) -> list[Adopted]:
        found = []
        for folder in sorted(p for p in self.root.iterdir() if p.is_dir()):
            fd = _try_lock(folder / "lock")
            if fd is not None:
                found.append(Adopted(folder, fd))
        return found

    def over_bound(self) -> bool:
        """Already full: a request can be refused before the work of decoding it."""
        with self._lock:
            return self._pending >= self.max_bytes

    def reserve(self, size: int) -> None:
        """Count a request against the bound before it is written; `SpoolFull` when it would pass it."""
        with self._lock:
            if self._pending and self._pending + size > self.max_bytes:
                raise SpoolFull(f"{self._pending / 1048576:.1f} MiB are waiting for the store "
                                f"(the spool's bound is {self.max_bytes / 1048576:.0f} MiB)")
            self._pending += size

    def release(self, size: int) -> None:
        with self._lock:
            self._pending -= size

    def append(self, records: list[Record]) -> list[Position]:
        """Write the records in one go and fsync once (group commit); their positions, in order."""
        assert self._fd is not None, "the spool is not open"
        data = b"".join(r.encoded() for r in records)
        view, written = memoryview(data), 0
        while written < len(data):
            written += os.write(self._fd, view[written:])
        _fsync(self._fd)
        positions, end = [], self._size
        for r in records:
            end += r.size
            positions.append(Position(self._segment, end))
        self._size = end
        if self._size >= self._segment_bytes:
            self._next_segment()
        return positions

    def _next_segment(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._segment += 1
        self._fd = os.open(self.folder / _segment_name(self._segment), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                           0o600)
        self._size = 0
        _fsync_dir(self.folder)

    def drained(self, position: Position, size: int) -> None:
        """Everything up to `position` is in the store: move the checkpoint, delete finished segments."""
        with self._lock:
            self._pending -= size
            old, self._drained = self._drained, max(self._drained, position)
        _write_checkpoint(self.folder, self._drained)
        for segment in range(old.segment, self._drained.segment):
            (self.folder / _segment_name(segment)).unlink(missing_ok=True)

    def close(self, *, remove: bool) -> None:
        """Stop appending; `remove` when everything was drained (nothing for the next start to replay)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        if remove:
            shutil.rmtree(self.folder, ignore_errors=True)


def reject(root: Path, record: Record) -> None:
    """Keep a record the store refused after it was acknowledged, so nothing accepted vanishes."""
    with open(root / "rejected.otlp", "ab") as f:
        f.write(record.encoded())
        f.flush()
        _fsync(f.fileno())


def _segment_name(segment: int) -> str:
    return f"{segment:010d}{SUFFIX}"


def _segments(folder: Path) -> list[int]:
    return sorted(int(p.stem) for p in folder.glob(f"*{SUFFIX}") if p.stem.isdigit())


def _checkpoint(folder: Path) -> Position:
    try:
        segment, end = (folder / "drained").read_text().split()
        return Position(int(segment), int(end))
    except (OSError, ValueError):
        return Position(0, 0)


def _write_checkpoint(folder: Path, position: Position) -> None:
    """Replaced atomically, not fsynced: a checkpoint lost to a crash only means replaying more."""
    temp = folder / "drained.new"
    temp.write_text(f"{position.segment} {position.end}")
    os.replace(temp, folder / "drained")
