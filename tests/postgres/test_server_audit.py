"""On PostgreSQL the server appends and signs the audit (migration 0008): same hashes as Python, no local key.

The body the server hashes must be byte for byte the one `record_hash` builds, so
Python's `verify` recomputes every server-written hash; the MAC is checked by the
server for any viewer, so two machines (two config folders) verify the same store.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text

from agentdesk.store.approvals import commands as approval_commands
from agentdesk.store.audit.chain import canonical_json, record_hash
from agentdesk.store.audit.verify import Failure, Verdict, verify_store
from agentdesk.store.persistence.database import Store, open_store
from agentdesk.store.persistence.postgres.engine import libpq_url
from agentdesk.store.runtime import AgentRuntime
from tests.postgres.test_roles import refused

MakeLogin = Callable[[str | None], tuple[str, str]]
HOSTILE = ['plain', 'quote " and \' apostrophe', 'back\\slash \\" \\\\', 'new\nline\r\ttab\b\f',
           ''.join(chr(c) for c in range(1, 32)) + '\x7f', 'é ß 中文 עברית', 'emoji 😀👩‍👩‍👧 \u2028\u2029 \ufeff',
           '{"json": ["inside", 1.5]}', '', '</script>&<>']


def seed(store: Store) -> str:
    rt = AgentRuntime(store)
    pid = rt.create_project("p")
    aid = rt.create_agent(rt.create_session(rt.create_task(pid, "t"), "s"), "a", "m")
    return rt.request_approval(rt.start_run(aid, "r"), "shell", {"cmd": HOSTILE[4] + HOSTILE[6]})


def verify(store: Store) -> object:
    with store.reading() as session:
        return verify_store(session)


def test_the_server_builds_the_body_python_hashes(pg_store: Store) -> None:
    with pg_store.engine.connect() as conn:
        for value in HOSTILE:
            assert conn.execute(text("SELECT agentdesk_json(:v)"), {"v": value}).scalar() == \
                json.dumps(value, ensure_ascii=False)
            payload = canonical_json({"text": value, "list": [value, None, 3]})
            for at in (1764648000.123456, 1764648000.0, 0.1, 1e-05, 123.25, 1733000000.1 + 2e-7):
                served = conn.execute(text("SELECT agentdesk_py_float(:at), agentdesk_record_hash("
                                           ":prev, :at_text, :v, 'act', 'ent', :v, :payload)"),
                                      {"at": at, "prev": "a" * 64, "at_text": repr(at), "v": value,
                                       "payload": payload}).one()
                assert served[0] == repr(at)
                assert served[1] == record_hash("a" * 64, at, value, "act", "ent", value, payload)


def test_the_server_hmac_is_rfc_2104(pg_store: Store) -> None:
    for secret in (b"k" * 32, b"\x00\xff" * 50, b""):
        with pg_store.engine.connect() as conn:
            mac = conn.execute(text("SELECT agentdesk_hmac(agentdesk_hmac_pad(:s, 54), agentdesk_hmac_pad(:s, 92), "
                                    ":m)"), {"s": secret, "m": "agentdesk-audit-record:" + "b" * 64}).scalar()
        assert mac == hmac.new(secret, b"agentdesk-audit-record:" + b"b" * 64, hashlib.sha256).hexdigest()


def test_records_the_server_wrote_verify_and_no_key_is_kept_locally(pg_store: Store, audit_config_dir: Path) -> None:
    approval = seed(pg_store)
    approval_commands.decide(pg_store, approval, True, "bob \"the\" operator\n😀", reason="ok \\ fine")
    report = verify(pg_store)
    assert report.ok and report.records >= 7 and report.keyed_from == 1, report  # type: ignore[attr-defined]
    assert not list(audit_config_dir.glob("audit/*.key"))
    assert list(audit_config_dir.glob("audit/*.anchor.jsonl"))  # the anchor stays local: truncation by the owner


def test_two_machines_write_and_both_verify(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    machines = [tmp_path / "laptop", tmp_path / "desktop"]
    approvals = []
    for folder in machines:
        monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(folder))
        store = open_store(pg_url)
        try:
            approvals.append(seed(store))
        finally:
            store.close()
    for n, folder in enumerate(machines):
        monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(folder))
        store = open_store(pg_url)
        try:
            approval_commands.decide(store, approvals[n], approve=n == 0, actor=f"op{n}", reason="no" if n else None)
            report = verify(store)
            assert report.ok and report.verdict == Verdict.INTACT, report  # type: ignore[attr-defined]
        finally:
            store.close()
    assert not list(tmp_path.glob("*/audit/*.key"))


def test_a_record_a_superuser_altered_is_found(pg_store: Store, pg_url: str) -> None:
    approval_commands.decide(pg_store, seed(pg_store), True, "bob")
    with psycopg.connect(libpq_url(pg_url)) as conn:
        seq, at, _actor, action, entity, entity_id, payload, prev = conn.execute(
            "SELECT seq, at, actor, action, entity, entity_id, payload, prev_hash FROM audit_log "
            "ORDER BY seq DESC LIMIT 1").fetchone()
        conn.execute("UPDATE audit_log SET actor = 'mallory' WHERE seq = %s", (seq,))
    report = verify(pg_store)
    assert report.failure == Failure.CONTENT_CHANGED and report.broken_seq == seq  # type: ignore[attr-defined]
    with psycopg.connect(libpq_url(pg_url)) as conn:  # re-hashed, but the MAC needs the server's key
        conn.execute("UPDATE audit_log SET hash = %s WHERE seq = %s",
                     (record_hash(prev, at, "mallory", action, entity, entity_id, payload), seq))
    report = verify(pg_store)
    assert report.failure == Failure.REHASHED_WITHOUT_KEY and report.broken_seq == seq  # type: ignore[attr-defined]
    assert "server says its HMAC does not" in str(report.reason)  # type: ignore[attr-defined]


def test_logins_reach_the_audit_only_through_the_function(pg_store: Store, make_login: MakeLogin) -> None:
    seed(pg_store)
    viewer_name, viewer = make_login("viewer")
    _, operator = make_login("operator")
    forged = ("INSERT INTO audit_log (at, actor, action, entity, entity_id, payload, prev_hash, hash) "
              "VALUES (1, 'x', 'x', 'x', 'x', '{}', 'x', 'x')")
    agent_name, agent = make_login("agent")
    append = "SELECT * FROM agentdesk_audit_append('1764648000.5', 'me', 'run.note', 'run', 'x', '{}')"
    for url in (viewer, operator, agent):
        assert refused(url, forged)
        assert refused(url, "SELECT * FROM agentdesk_audit_key")
        assert refused(url, "UPDATE audit_log SET mac = NULL")
    assert refused(viewer, append)
    assert refused(operator, append)  # an operator's records come only from the functions it calls (0012)
    assert refused(agent, "SELECT * FROM agentdesk_audit_append('1764648000.5', 'me', 'note', 'store', 'x', '{}')")
    with psycopg.connect(libpq_url(agent)) as conn:  # an agent appends a runtime's records
        seq = conn.execute(append).fetchone()[0]
        row = conn.execute("SELECT actor, db_login FROM audit_log WHERE seq = %s", (seq,)).fetchone()
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="as Python prints it"):
            conn.execute("SELECT * FROM agentdesk_audit_append('1764648000.50', 'me', 'run.n', 'run', 'x', '{}')")
    assert row == ("me", agent_name)
    viewing = open_store(viewer, read_only=True)
    try:
        report = verify(viewing)  # a viewer's login on another machine checks every MAC through the server
        assert report.ok and report.records >= 5, report  # type: ignore[attr-defined]
    finally:
        viewing.close()
    assert viewer_name


def test_a_login_a_superuser_rewrote_is_found(pg_store: Store, pg_url: str) -> None:
    """db_login is signed with the record (0008): changing who did it is reported, in one sentence."""
    approval_commands.decide(pg_store, seed(pg_store), True, "bob")
    assert verify(pg_store).ok  # type: ignore[attr-defined]
    with psycopg.connect(libpq_url(pg_url)) as conn:  # the superuser: no grant stops it
        seq = conn.execute("SELECT max(seq) FROM audit_log WHERE action = 'approval.approved'").fetchone()[0]
        conn.execute("UPDATE audit_log SET db_login = 'mallory' WHERE seq = %s", (seq,))
    report = verify(pg_store)
    assert report.failure == Failure.CONTENT_CHANGED and report.broken_seq == seq  # type: ignore[attr-defined]
    reason = str(report.reason)  # type: ignore[attr-defined]
    assert "database login" in reason and reason.count(". ") == 0 and reason.endswith("."), reason
    with psycopg.connect(libpq_url(pg_url)) as conn:  # a login made NULL is no better
        conn.execute("UPDATE audit_log SET db_login = NULL WHERE seq = %s", (seq,))
    assert verify(pg_store).broken_seq == seq  # type: ignore[attr-defined]


def _anchor_file(store: Store) -> Path:
    from agentdesk.store.audit import keys
    from agentdesk.store.audit.chain import store_id_of

    with store.reading() as session:
        store_id = store_id_of(session)
    assert store_id is not None
    keys.flush_anchors()
    return keys.anchor_path(store_id)


def test_a_forged_anchor_line_is_found_by_the_server(pg_store: Store) -> None:
    """Anchor lines on PostgreSQL carry the server's MAC; the server checks them (no key leaves it)."""
    approval_commands.decide(pg_store, seed(pg_store), True, "bob")
    path = _anchor_file(pg_store)
    lines = path.read_text().splitlines()
    last = json.loads(lines[-1])
    assert last["mac"] and verify(pg_store).ok  # type: ignore[attr-defined]
    # A made-up head past the end, with a MAC of the right shape but not the server's.
    forged = dict(last, seq=last["seq"] + 3, hash="f" * 64, mac="0" * 64)
    path.write_text("\n".join([*lines, json.dumps(forged)]) + "\n")
    report = verify(pg_store)
    assert report.failure == Failure.ANCHOR_FORGED, report  # type: ignore[attr-defined]
    assert "1 of its lines" in str(report.reason)  # type: ignore[attr-defined]
    # A real line whose hash was changed (its MAC kept) is forged too.
    edited = dict(last, hash="e" * 64)
    path.write_text("\n".join([*lines[:-1], json.dumps(edited)]) + "\n")
    assert verify(pg_store).failure == Failure.ANCHOR_FORGED  # type: ignore[attr-defined]
    path.write_text("\n".join(lines) + "\n")
    assert verify(pg_store).ok  # type: ignore[attr-defined]
