"""Replaying an adopted spool: each record decoded again and handed to the writer as if just received.

The spool keeps request bodies as received (not the decoder's output), so a spool
left by an older version replays through today's decoder and mapping. A record
that no longer decodes is set aside in `rejected.otlp` and logged, never dropped
silently.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentdesk.store.ingest.receiver_decode import BodyRefused, decode_logs, decode_prepared
from agentdesk.store.ingest.receiver_spool import LOGS, PROTOBUF, Adopted, Record, reject
from agentdesk.store.ingest.receiver_writer import Entry

log = logging.getLogger(__name__)


def content_type(record: Record) -> str:
    return "application/x-protobuf" if record.media == PROTOBUF else "application/json"


def decoded(record: Record, limit: int) -> tuple[Any, int]:
    """A record's payload and span (or log record) count, as the receiver's decoder gives them."""
    if record.kind == LOGS:
        batch = decode_logs(record.body, content_type(record), None, limit)
        return batch, len(batch.logs)
    return decode_prepared(record.body, content_type(record), None, limit)


def replayed(adopted: list[Adopted], root: Path, limit: int) -> Iterator[Entry]:
    """Entries for every record of the adopted spools, each folder removed once its records are written."""
    for spool in adopted:
        count = 0
        for record, position in spool.records():
            try:
                payload, spans = decoded(record, max(limit, len(record.body)))
            except BodyRefused as exc:
                log.error("OTLP receiver: a spooled request no longer decodes (%s); kept in %s", exc,
                          root / "rejected.otlp")
                reject(root, record)
                continue
            count += spans
            yield Entry(payload, spans, record, functools.partial(spool.drained, position))
        if count:
            log.warning("OTLP receiver: replayed %d spans a previous receiver had acknowledged (%s)", count,
                        spool.folder.name)
        yield Entry(None, 0, None, spool.remove)
