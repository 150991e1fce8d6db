"""PostgreSQL anchor lines in format 2 (migration 0014): the server's MAC covers the line's location too."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

from sqlalchemy import text

from agentdesk.store.approvals import commands as approval_commands
from agentdesk.store.audit import keys
from agentdesk.store.audit.chain import store_id_of
from agentdesk.store.audit.verify import ChainReport, Failure, verify_store
from agentdesk.store.persistence.database import Store
from tests.postgres.test_server_audit import HOSTILE, seed

ASTRAL = ["\U0001f600 and \U00010000 and \U0010ffff", "\x7f\x80\xff\u0100\uffff", "a\\b\"c", "/tmp/x y/z.db"]


def _verify(store: Store) -> ChainReport:
    with store.reading() as session:
        return verify_store(session)


def _anchor(store: Store) -> tuple[str, Path]:
    with store.reading() as session:
        store_id = store_id_of(session)
    assert store_id is not None
    keys.flush_anchors()
    return store_id, keys.anchor_path(store_id)


def test_the_server_writes_the_anchor_text_python_does(pg_store: Store) -> None:
    secret = b"s" * 32
    with pg_store.engine.connect() as conn:
        for location in [*HOSTILE, *ASTRAL]:
            for store_id in ("0123abcd", location):
                expected = json.dumps(["agentdesk-audit-anchor", 2, store_id, 2**40 + 7, "ab" * 32, location],
                                      ensure_ascii=True)
                row = conn.execute(text(
                    "SELECT t, agentdesk_hmac(agentdesk_hmac_pad(:s, 54), agentdesk_hmac_pad(:s, 92), t) FROM "
                    "(SELECT agentdesk_audit_anchor_text(:store, :seq, :hash, :loc) AS t) q"),
                    {"s": secret, "store": store_id, "seq": 2**40 + 7, "hash": "ab" * 32, "loc": location}).one()
                assert row[0] == expected
                assert row[1] == keys._anchor_mac_v2(secret, store_id, 2**40 + 7, "ab" * 32, location)
                assert row[1] == hmac.new(secret, expected.encode(), hashlib.sha256).hexdigest()


def test_new_anchor_lines_are_format_2_and_verify(pg_store: Store) -> None:
    approval_commands.decide(pg_store, seed(pg_store), True, "bob")  # the appender's lines, then a head's
    _, path = _anchor(pg_store)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines and all(line["v"] == 2 and line["mac"] and line["location"] for line in lines)
    report = _verify(pg_store)
    assert report.ok and report.older_anchor_lines == 0, report


def test_a_line_moved_to_another_location_is_an_edited_anchor(pg_store: Store) -> None:
    approval_commands.decide(pg_store, seed(pg_store), True, "bob")
    _, path = _anchor(pg_store)
    lines = path.read_text().splitlines()
    moved = [{**json.loads(line), "location": json.loads(line)["location"] + "-elsewhere"} for line in lines]
    path.write_text("".join(json.dumps(line) + "\n" for line in moved))
    report = _verify(pg_store)
    assert report.failure == Failure.ANCHOR_FORGED, report
    assert f"{len(lines)} of its lines" in (report.reason or "")
    # one line moved: still caught (the others anchor the head)
    path.write_text("".join([*(line + "\n" for line in lines), json.dumps(moved[-1]) + "\n"]))
    assert _verify(pg_store).failure == Failure.ANCHOR_FORGED
    path.write_text("".join(line + "\n" for line in lines))
    assert _verify(pg_store).ok


def test_older_anchor_lines_still_verify_and_say_so(pg_store: Store) -> None:
    approval_commands.decide(pg_store, seed(pg_store), True, "bob")
    store_id, path = _anchor(pg_store)
    old = []
    with pg_store.engine.connect() as conn:  # the owner: the key's pads, to sign as migration 0008 did
        for line in (json.loads(raw) for raw in path.read_text().splitlines()):
            line.pop("v")
            line["mac"] = conn.execute(text(
                "SELECT agentdesk_hmac(k.inner_pad, k.outer_pad, 'agentdesk-audit-anchor:' || :store || ':' "
                "|| :seq || ':' || :hash) FROM agentdesk_audit_key k"),
                {"store": store_id, "seq": line["seq"], "hash": line["hash"]}).scalar_one()
            old.append(line)
    path.write_text("".join(json.dumps(line) + "\n" for line in old))
    report = _verify(pg_store)
    assert report.ok and report.older_anchor_lines == len(old), report
    # an older line's edited hash is still caught
    path.write_text("".join(json.dumps(line) + "\n" for line in [*old[:-1], {**old[-1], "hash": "e" * 64}]))
    assert _verify(pg_store).failure == Failure.ANCHOR_FORGED
