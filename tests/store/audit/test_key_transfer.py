"""Issue 26: moving the audit key (`audit key export/import`), a store signed by two keys, the anchor's location.

Each "machine" is a config folder of its own ($AGENTDESK_CONFIG_DIR): the key and anchor live there, and
`chain._KEYS` caches per folder, so switching the variable is switching the machine.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

import agentdesk.cli.main as cli
from agentdesk.store.audit import Failure, Verdict, chain, keys, store_id_of
from agentdesk.store.audit.verify import DASH
from agentdesk.store.errors import StoreUnavailable
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World
from tests.store.audit.helpers import rows, seqs, sql, verify


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _sid(store: Store) -> str:
    with store.reading() as session:
        found = store_id_of(session)
    assert found is not None
    return found


def _machine(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    folder.mkdir(exist_ok=True)
    monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(folder))


def test_export_then_import_moves_the_key_to_a_second_machine(
        store: Store, store_path: Path, world: World, audit_config_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sid = _sid(store)
    exported = tmp_path / "store.agentdesk-key"
    code, out, err = run(capsys, "--store", str(store_path), "audit", "key", "export", "-o", str(exported))
    assert (code, err) == (0, "") and out.startswith(f"The audit key of store {sid} (")
    assert stat.S_IMODE(exported.stat().st_mode) == 0o600
    body = json.loads(exported.read_text())
    assert (body["type"], body["store_id"]) == ("agentdesk-audit-key", sid)
    assert body["keys"][0]["fingerprint"] == keys.load_key(sid).fingerprint  # type: ignore[union-attr]

    _machine(monkeypatch, tmp_path / "machine-b")
    code, _, err = run(capsys, "--store", str(store_path), "verify")
    assert code == 7 and err.startswith("agentdesk: The signatures cannot be checked")
    with pytest.raises(StoreUnavailable) as refused:
        AgentRuntime(store).create_project("refused on machine b")
    assert "`agentdesk audit key import FILE`" in str(refused.value) and "\n" not in str(refused.value)

    code, out, err = run(capsys, "--store", str(store_path), "audit", "key", "import", str(exported))
    assert (code, err) == (0, "") and out.startswith(f"Imported {body['keys'][0]['fingerprint']} for store {sid}")
    assert stat.S_IMODE(keys.key_path(sid).stat().st_mode) == 0o600
    assert keys.load_key(sid).secret.hex() == body["keys"][0]["secret"]  # type: ignore[union-attr]
    AgentRuntime(store).create_project("written on machine b")
    code, out, _ = run(capsys, "--store", str(store_path), "verify")
    assert code == 0 and out.startswith("Audit chain intact:") and "two keys" not in out
    code, out, _ = run(capsys, "--store", str(store_path), "audit", "key", "import", str(exported))
    assert code == 0 and "already holds" in out and "nothing changed" in out
    _machine(monkeypatch, audit_config_dir)  # and the first machine still verifies it, with its own anchor
    assert verify(store).verdict == Verdict.INTACT


def test_import_refuses_another_stores_key_and_a_key_that_signs_nothing_here(
        store: Store, store_path: Path, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    sid = _sid(store)
    before = keys.key_path(sid).read_bytes()
    other = tmp_path / "other.key"
    other.write_text(json.dumps({"store_id": "f" * 32, "secret": "ab" * 32, "keyed_from": 1}))
    code, out, err = run(capsys, "--store", str(store_path), "audit", "key", "import", str(other))
    assert (code, out) == (2, "")
    assert err == (f"agentdesk: {other} holds the audit key of store {'f' * 32}, not of this store ({sid}); "
                   "nothing was imported.\n")
    stranger = tmp_path / "stranger.key"
    stranger.write_text(json.dumps({"store_id": sid, "secret": "ab" * 32, "keyed_from": 1}))
    code, _, err = run(capsys, "--store", str(store_path), "audit", "key", "import", str(stranger))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"agentdesk: The key {keys.fingerprint(bytes.fromhex('ab' * 32))} in {stranger} "
                          "verifies none of the store's") and err.endswith("nothing was imported.\n")
    junk = tmp_path / "junk"
    junk.write_bytes(b"\xff not a key")
    code, _, err = run(capsys, "--store", str(store_path), "audit", "key", "import", str(junk))
    assert code == 2 and "holds no audit key" in err
    code, _, err = run(capsys, "--store", str(store_path), "audit", "key", "import", "/dev/zero")
    assert code == 2 and "is a character device" in err
    assert keys.key_path(sid).read_bytes() == before
    code, _, err = run(capsys, "--store", str(store_path), "audit", "key", "import", str(tmp_path / "none"))
    assert code == 2 and "There is no key file at" in err


def _forked_write(store: Store, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A write from machine B before it was given A's key: as when both made a key before either had signed
    (the race the lost-key refusal cannot close), or as versions before issue 26 did."""
    with monkeypatch.context() as patch:
        patch.setattr(chain, "_refuse_second_key", lambda session, store_id: None)
        AgentRuntime(store).create_project(name)


def test_a_store_written_from_two_config_folders_verifies_from_each_after_key_import(
        store: Store, store_path: Path, world: World, audit_config_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = audit_config_dir, tmp_path / "machine-b"
    sid = _sid(store)
    a_records = list(seqs(store_path))
    _machine(monkeypatch, b)
    _forked_write(store, monkeypatch, "b1")
    b_records = [s for s in seqs(store_path) if s not in a_records]
    for n in range(2):  # alternately, each with its own key
        _machine(monkeypatch, a)
        AgentRuntime(store).create_project(f"a{n}")
        _machine(monkeypatch, b)
        AgentRuntime(store).create_project(f"b{n + 2}")
    macs = dict(rows(store_path, "SELECT seq, mac FROM audit_log"))
    _machine(monkeypatch, a)
    ka = keys.load_key(sid)
    _machine(monkeypatch, b)
    kb = keys.load_key(sid)
    assert ka is not None and kb is not None and ka.fingerprint != kb.fingerprint
    signed_by_b = sorted(s for s, mac in macs.items() if mac == kb.mac(str(rows(
        store_path, "SELECT hash FROM audit_log WHERE seq = ?", s)[0][0])))
    assert signed_by_b[0] == b_records[0] and len(signed_by_b) > len(b_records)

    for here, lacking in ((a, kb), (b, ka)):  # before the import: exit 7 naming the other machine's records
        _machine(monkeypatch, here)
        code, out, err = run(capsys, "--store", str(store_path), "verify", "--json")
        report = json.loads(out)
        assert code == 7 and report["failure"] == str(Failure.UNKNOWN_KEY), err
        assert "signed by a key this machine does not hold" in err and "`agentdesk audit key import FILE`" in err
        assert err.count("\n") == 1
        missing = [s for s, mac in macs.items() if mac == lacking.mac(str(rows(
            store_path, "SELECT hash FROM audit_log WHERE seq = ?", s)[0][0]))]
        assert report["broken_seq"] == min(missing)
        assert f"Records {min(missing)}" in err

    files = {}
    for here in (a, b):
        _machine(monkeypatch, here)
        files[here] = tmp_path / f"{here.name}.key-export"
        assert run(capsys, "--store", str(store_path), "audit", "key", "export", "-o", str(files[here]))[0] == 0
    _machine(monkeypatch, a)
    code, out, _ = run(capsys, "--store", str(store_path), "audit", "key", "import", str(files[b]))
    assert code == 0 and f"Imported {kb.fingerprint}" in out and f"{ka.fingerprint} (signing), beside " \
        f"{kb.fingerprint}" in out
    _machine(monkeypatch, b)
    assert run(capsys, "--store", str(store_path), "audit", "key", "import", str(files[a]))[0] == 0
    last = seqs(store_path)[-1]
    for here in (a, b):
        _machine(monkeypatch, here)
        code, out, err = run(capsys, "--store", str(store_path), "verify")
        assert (code, err) == (0, ""), err
        assert f"signed by two keys: {ka.fingerprint} (records 1{DASH}" in out
        assert f"{kb.fingerprint} ({b_records[0]}, " in out and f" and {last})" in out  # b wrote the last one
        code, out, _ = run(capsys, "--store", str(store_path), "verify", "--json")
        report = json.loads(out)
        assert [k["fingerprint"] for k in report["keys"]] == [ka.fingerprint, kb.fingerprint]
        assert sum(b - a + 1 for k in report["keys"] for a, b in k["records"]) == report["records"]
    AgentRuntime(store).create_project("b after the import")  # each still signs with its own key
    _machine(monkeypatch, a)
    assert verify(store).verdict == Verdict.INTACT

    # Tampering is still tampering: a record re-signed by nobody, in a store both keys verify.
    sql(store_path, "UPDATE audit_log SET mac = ? WHERE seq = ?", "0" * 64, b_records[0])
    report = verify(store)
    assert (report.verdict, report.failure, report.broken_seq) == (
        Verdict.TAMPERED, Failure.REHASHED_WITHOUT_KEY, b_records[0])


def test_without_the_other_key_a_record_this_machine_anchored_is_still_tampered(
        store: Store, store_path: Path, world: World, audit_config_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The registered second key must not excuse a change to what this machine wrote and anchored."""
    _machine(monkeypatch, tmp_path / "machine-b")
    _forked_write(store, monkeypatch, "b1")
    _machine(monkeypatch, audit_config_dir)
    AgentRuntime(store).create_project("a, anchored here")
    mine = seqs(store_path)[-1]
    assert verify(store).verdict == Verdict.CANNOT_CHECK
    sql(store_path, "UPDATE audit_log SET mac = ? WHERE seq = ?", "1" * 64, mine)
    report = verify(store)
    assert (report.verdict, report.failure, report.broken_seq) == (
        Verdict.TAMPERED, Failure.REHASHED_WITHOUT_KEY, mine)


def test_a_single_key_store_with_a_changed_mac_is_tampered_with_a_hint(
        store: Store, store_path: Path, world: World) -> None:
    """No second key registered: a MAC no key made is a re-hash, as before (with how to import a key)."""
    first = seqs(store_path)[0]
    sql(store_path, "UPDATE audit_log SET mac = ? WHERE seq = ?", "2" * 64, first)
    report = verify(store)
    assert (report.verdict, report.failure, report.broken_seq) == (Verdict.TAMPERED, Failure.REHASHED_WITHOUT_KEY,
                                                                     first)


def test_import_sign_makes_the_imported_key_sign_and_keeps_the_old_one(
        store: Store, store_path: Path, world: World, audit_config_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sid = _sid(store)
    _machine(monkeypatch, tmp_path / "machine-b")
    _forked_write(store, monkeypatch, "b1")
    kb = keys.load_key(sid)
    exported = tmp_path / "b.key-export"
    assert run(capsys, "--store", str(store_path), "audit", "key", "export", "-o", str(exported))[0] == 0
    _machine(monkeypatch, audit_config_dir)
    ka = keys.load_key(sid)
    assert ka is not None and kb is not None
    code, out, _ = run(capsys, "--store", str(store_path), "audit", "key", "import", "--sign", str(exported))
    assert code == 0 and f"{kb.fingerprint} (signing), beside {ka.fingerprint}" in out
    AgentRuntime(store).create_project("a, signed with b's key now")
    last = seqs(store_path)[-1]
    digest, mac = rows(store_path, "SELECT hash, mac FROM audit_log WHERE seq = ?", last)[0]
    assert mac == kb.mac(str(digest))
    assert verify(store).verdict == Verdict.INTACT


def test_an_anchor_lines_location_is_covered_by_its_mac(store: Store, store_path: Path, world: World,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 26 item 10: moving the anchor's lines to another location used to make verify skip them."""
    path = keys.anchor_path(_sid(store))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert all(line["v"] == 2 for line in lines)
    code, out, _ = run(capsys, "--store", str(store_path), "verify", "--json")
    assert code == 0 and json.loads(out)["anchor_format"] == "current"
    moved = [{**line, "location": line["location"] + "-elsewhere"} for line in lines]
    path.write_text("".join(json.dumps(line) + "\n" for line in moved))
    report = verify(store)
    assert report.failure == Failure.ANCHOR_FORGED and f"{len(lines)} of its lines" in (report.reason or "")


def test_older_anchor_lines_still_verify_and_say_so(store: Store, store_path: Path, world: World,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    sid = _sid(store)
    key = keys.load_key(sid)
    assert key is not None
    path = keys.anchor_path(sid)
    old = []
    for line in (json.loads(text) for text in path.read_text().splitlines()):
        line.pop("v")
        line["mac"] = key.anchor_mac(line["seq"], line["hash"])  # as versions before format 2 wrote them
        old.append(json.dumps(line) + "\n")
    path.write_text("".join(old))
    code, out, _ = run(capsys, "--store", str(store_path), "verify", "--json")
    report = json.loads(out)
    assert code == 0 and report["anchor_format"] == "older anchor format"
    assert report["older_anchor_lines"] == len(old) and report["anchored_seq"] == seqs(store_path)[-1]
    sql(store_path, "DELETE FROM audit_log WHERE seq = ?", seqs(store_path)[-1])
    assert verify(store).failure == Failure.RECORDS_MISSING_AFTER  # the older lines still anchor


def test_a_backed_up_key_file_restores_the_key_then_verify_passes(
        store: Store, store_path: Path, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """docs/audit.md "Backups": the key file itself (not only an export) is accepted by import."""
    sid = _sid(store)
    backup = tmp_path / "backup.key"
    backup.write_bytes(keys.key_path(sid).read_bytes())
    keys.key_path(sid).unlink()
    monkeypatch.setattr(chain, "_KEYS", {})  # a new process
    assert run(capsys, "--store", str(store_path), "verify")[0] == 7
    code, out, _ = run(capsys, "--store", str(store_path), "audit", "key", "export")
    assert code == 2
    code, out, err = run(capsys, "--store", str(store_path), "audit", "key", "import", str(backup))
    assert (code, err) == (0, "") and f"into {keys.key_path(sid)}" in out
    code, out, _ = run(capsys, "--store", str(store_path), "verify")
    assert code == 0 and out.startswith("Audit chain intact:")
    AgentRuntime(store).create_project("after the restore")
    code, out, _ = run(capsys, "--store", str(store_path), "audit", "key", "export")  # to stdout
    assert code == 0 and json.loads(out)["keys"][0]["secret"] == json.loads(backup.read_text())["secret"]
