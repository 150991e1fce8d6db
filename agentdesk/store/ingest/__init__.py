"""OpenTelemetry traces in and out: decoding OTLP, the GenAI/OpenInference mapping, bulk writes.

`ingest_request` / `ingest_json` write payloads that arrive whole (the receiver);
`importer.import_files` streams files of any size; `export` writes runs back out.

The names below are loaded on first use: the importer's helper process imports only
the decoding and mapping modules, and must not pay for SQLAlchemy and Alembic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentdesk.store.ingest.ingest import ingest_json, ingest_request, ingest_spans
    from agentdesk.store.ingest.report import IngestReport
    from agentdesk.store.ingest.spans import BadRecord, OtelSpan

_WHERE = {"ingest_json": "ingest", "ingest_request": "ingest", "ingest_spans": "ingest",
          "BadRecord": "spans", "OtelSpan": "spans", "IngestReport": "report"}

__all__ = ["BadRecord", "IngestReport", "OtelSpan", "ingest_json", "ingest_request", "ingest_spans"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
