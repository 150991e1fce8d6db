"""`agentdesk agent-token create|list|revoke`: the token printed once, only its hash kept, one-sentence errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentdesk.cli.main import main
from agentdesk.store.agents import tokens
from agentdesk.store.persistence.database import open_store


def run(store: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--store", str(store), "agent-token", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_create_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    code, out, _ = run(store, capsys, "create", "refund-bot", "--url", "http://127.0.0.1:9999")
    assert code == 0
    token = out.splitlines()[1]
    assert token.startswith("adt_") and f"AGENTDESK_URL=http://127.0.0.1:9999 AGENTDESK_TOKEN={token}" in out
    opened = open_store(str(store))
    try:
        identity = tokens.verify(opened, token)
        assert identity is not None and identity.name == "refund-bot"
        assert tokens.verify(opened, token + "x") is None
    finally:
        opened.close()
    code, out, _ = run(store, capsys, "list", "--json")
    listed = json.loads(out)
    assert code == 0 and token not in out and [t["name"] for t in listed] == ["refund-bot"]
    assert set(listed[0]) == {"id", "name", "created_at", "created_by", "last_used_at", "revoked_at", "active"}
    code, out, _ = run(store, capsys, "list")
    assert code == 0 and "refund-bot" in out and token not in out
    code, out, _ = run(store, capsys, "revoke", listed[0]["id"])
    assert code == 0 and "Revoked" in out
    opened = open_store(str(store))
    try:
        assert tokens.verify(opened, token) is None
    finally:
        opened.close()
    code, out, _ = run(store, capsys, "list", "--json")
    assert json.loads(out)[0]["active"] is False


def test_revoking_by_name_takes_every_active_token_of_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    run(store, capsys, "create", "bot")
    run(store, capsys, "create", "bot")
    code, out, _ = run(store, capsys, "revoke", "bot")
    assert code == 0 and out.count("Revoked") == 2


@pytest.mark.parametrize(("argv", "code", "words"), [
    (["revoke", "nobody"], 4, "no active agent token"),
    (["create", "  "], 2, "token name is required"),
    (["create", "bad\x1bname"], 2, "printable"),
    (["create", "x" * 101], 2, "at most 100"),
])
def test_errors_are_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int,
                                 words: str) -> None:
    store = tmp_path / "s.sqlite"
    assert main(["--store", str(store), "init"]) == 0
    capsys.readouterr()
    got, _, err = run(store, capsys, *argv)
    assert got == code and words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_listing_never_creates_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "missing.sqlite"
    code, _, err = run(store, capsys, "list")
    assert code == 5 and not store.exists() and "Traceback" not in err
