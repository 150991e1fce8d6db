"""`agentdesk audit export`: the log, with its anchor, as one JSON Lines file for an auditor.

Line 1 is a header (store id, location, head, what `verify` said at export time);
then every record as stored (`"type": "record"`; a value that is not text, a
tampered blob, as `{"$bytes": hex}`); then the anchor: every head the local anchor
file holds, and the head at export time (`"type": "anchor"`). Kept apart from the
store, the file is an anchor of its own: `agentdesk verify --anchor FILE` checks
the store against it, so a later truncation or rewrite shows even to someone who
never had this machine's anchor file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, TextIO

from sqlalchemy import literal_column, select
from sqlalchemy.orm import Session

from agentdesk.store.audit import keys
from agentdesk.store.audit.chain import location_of, store_id_of
from agentdesk.store.audit.verify import ChainReport, _columns, verify_store
from agentdesk.store.persistence.schema import AuditRow

FORMAT = "agentdesk-audit-export"
BATCH = 5000


def _plain(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$bytes": bytes(value).hex()}
    return repr(value)


def _line(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=True, sort_keys=True, default=_plain) + "\n"


def _records(session: Session) -> Iterator[dict[str, Any]]:
    columns = _columns(session)
    if session.get_bind().dialect.name == "postgresql":  # the login the server signed each record for (0005)
        columns = [*columns, literal_column("db_login").label("db_login")]
    last: int | None = None
    while True:
        query = select(*columns).order_by(AuditRow.seq).limit(BATCH)
        rows = session.execute(query if last is None else query.where(AuditRow.seq > last)).all()
        if not rows:
            return
        for row in rows:
            yield {"type": "record", **row._asdict()}
        last = int(rows[-1].seq)


def export_audit(session: Session, out: TextIO) -> tuple[ChainReport, int]:
    """Write the export to `out`; returns what `verify` said (the header carries it too) and the record count."""
    report = verify_store(session)
    store_id = store_id_of(session)
    key = None
    if store_id is not None:
        try:
            key = keys.load_key(store_id)
        except keys.KeyUnavailable:
            key = None
    head = session.execute(select(AuditRow.seq, AuditRow.hash).order_by(AuditRow.seq.desc()).limit(1)).first()
    out.write(_line({
        "type": "header", "format": FORMAT, "version": 1, "store_id": store_id, "location": location_of(session),
        "exported_at": time.time(), "keyed_from": key.first_keyed if key else None,
        "head": None if head is None else {"seq": head.seq, "hash": head.hash},
        "verify": {"verdict": str(report.verdict), "records": report.records, "reason": report.reason,
                   "notes": list(report.notes)}}))
    count = 0
    for record in _records(session):
        out.write(_line(record))
        count += 1
    anchor = keys.read_anchor(keys.anchor_path(store_id), key, location_of(session)) if store_id else None
    for seq in sorted(anchor.heads if anchor else {}):
        assert anchor is not None
        out.write(_line({"type": "anchor", "seq": seq, "hash": anchor.heads[seq], "source": anchor.where}))
    if head is not None and isinstance(head.hash, str):
        out.write(_line({"type": "anchor", "seq": head.seq, "hash": head.hash, "source": "export",
                         "at": time.time(), "mac": key.anchor_mac(head.seq, head.hash) if key else None}))
    return report, count
