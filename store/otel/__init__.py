"""OpenTelemetry traces in and out: decoding OTLP, the GenAI/OpenInference mapping, bulk writes.

`ingest_request` / `ingest_json` write payloads that arrive whole (the receiver);
`importer.import_files` streams files of any size; `export` writes runs back out.
"""

from agentdesk.store.otel.ingest import ingest_json, ingest_request, ingest_spans
from agentdesk.store.otel.spans import BadRecord, OtelSpan
from agentdesk.store.otel.writer import IngestReport

__all__ = ["BadRecord", "IngestReport", "OtelSpan", "ingest_json", "ingest_request", "ingest_spans"]
