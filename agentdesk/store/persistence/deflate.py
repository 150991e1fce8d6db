"""The codec of large stored payloads (`payloads.py` says where it is used, and why): a marker byte and a raw
deflate stream. Apart from `payloads` so the import's helper process can deflate without SQLAlchemy."""

from __future__ import annotations

import zlib
from typing import Any

THRESHOLD = 768
"""Shorter values stay TEXT: deflate saves little on them, and each call costs about the same CPU whatever the
size, so a tool call's few hundred bytes are not worth it (the OTel import bench: half the CPU of a 256-byte
threshold for about 100 bytes a span more)."""
DEFLATE = 0x01
"""The marker byte of a raw deflate stream (zlib's `wbits=-15` reads any window size)."""
LEVEL, WINDOW_BITS, MEM_LEVEL = 1, -12, 4
"""Fastest level, a 4 KiB window and a small hash table: a span's attributes are a few KiB, and a compressor
that allocates little starts fast (the default 32 KiB window and memLevel 8 take several times longer per value
here; level 6 saves under 3% more)."""


def pack(text: str | None) -> str | bytes | None:
    """What to store on SQLite for `text`: itself, or the marker and its deflate stream when that is smaller."""
    if isinstance(text, Prepacked):
        return _finish(text)
    if text is None or len(text) < THRESHOLD:
        return text
    raw = text.encode("utf-8", "surrogatepass")
    packer = _packer()
    return _smaller(packer.compress(raw) + packer.flush(), len(raw), text)


def _packer() -> Any:
    return zlib.compressobj(LEVEL, zlib.DEFLATED, WINDOW_BITS, MEM_LEVEL)


def _smaller(body: bytes, raw_bytes: int, text: str) -> str | bytes:
    """The marker and `body` when that is smaller than the text's `raw_bytes`, else the text itself."""
    return bytes((DEFLATE,)) + body if len(body) + 1 < raw_bytes else text


class Prepacked(str):
    """Text whose beginning was already deflated elsewhere (`pack_head`, in the import's helper process):
    `pack` deflates only the rest, and stores the two streams one after the other (a stream flushed to a byte
    boundary, then a fresh one, is one valid deflate stream; the second refers to nothing in the first).

    Why: the writer adds a few keys to the end of a model span's attributes (`prepare.add_keys`), so the text
    stored is only known there; deflating all of it there was ~0.7 s of the import's single-threaded writing
    per 100,000 spans, where the helper has a core to spare while it maps."""

    head: bytes
    head_bytes: int
    """The UTF-8 length of the text `head` holds: the first `covered` characters."""
    covered: int


def pack_head(text: str) -> tuple[bytes, int] | None:
    """The deflated stream (flushed, not finished) of all of `text` but its last character, and that part's UTF-8
    length; None when `pack` would keep the text as it is."""
    if len(text) < THRESHOLD:
        return None
    raw = text[:-1].encode("utf-8", "surrogatepass")
    packer = _packer()
    return packer.compress(raw) + packer.flush(zlib.Z_SYNC_FLUSH), len(raw)


def prepacked(text: str, head: tuple[bytes, int], covered: int) -> Prepacked:
    """`text`, whose first `covered` characters `head` holds deflated (`pack_head` of a text they begin)."""
    out = Prepacked(text)
    out.head, out.head_bytes = head
    out.covered = covered
    return out


def _finish(text: Prepacked) -> str | bytes:
    tail = text[text.covered:].encode("utf-8", "surrogatepass")
    packer = _packer()
    return _smaller(text.head + packer.compress(tail) + packer.flush(), text.head_bytes + len(tail), str(text))


def unpack(value: Any) -> Any:
    """The text of a stored payload: TEXT (and anything not bytes) as it is, a marked BLOB decompressed.

    A BLOB without a marker this version knows (another program wrote bytes there) reads as lenient UTF-8,
    as TEXT that is not UTF-8 does (`sqlite.lenient_text`)."""
    if not isinstance(value, bytes | bytearray | memoryview):
        return value
    data = bytes(value)
    if data[:1] == bytes((DEFLATE,)):
        try:
            return zlib.decompress(data[1:], -15).decode("utf-8", "surrogatepass")
        except (zlib.error, UnicodeDecodeError):
            pass
    return data.decode("utf-8", "replace")
