"""`agentdesk receive` refusals: one sentence, exit 2, and no store created for a refused start."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from agentdesk.cli.main import main


@pytest.mark.parametrize(("argv", "words"), [
    (["--port", "70000"], "0-65535"),
    (["--host", "0.0.0.0"], "--allow-remote"),
    (["--host", "0.0.0.0", "--allow-remote"], "bearer token"),
    (["--spool-mb", "0"], "must be positive"),
])
def test_refused_configurations(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                argv: list[str], words: str) -> None:
    monkeypatch.delenv("AGENTDESK_RECEIVER_TOKEN", raising=False)
    store = tmp_path / "s.sqlite"
    assert main(["--store", str(store), "receive", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err.strip().splitlines()[-1] and "Traceback" not in err  # argparse's usage may precede it
    assert not store.exists()


def test_a_taken_port_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code = main(["--store", str(tmp_path / "s.sqlite"), "receive", "--port", str(taken.getsockname()[1])])
    err = capsys.readouterr().err
    assert code == 2 and "Cannot listen on 127.0.0.1" in err and "Traceback" not in err


def test_the_token_can_come_from_the_environment(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_RECEIVER_TOKEN", "from-env")
    code = main(["--store", str(tmp_path / "s.sqlite"), "receive", "--host", "0.0.0.0", "--allow-remote",
                 "--port", "0", "--duration", "0.3"])
    out = capsys.readouterr().out
    assert code == 0 and "Receiving OTLP/HTTP on http://0.0.0.0:" in out and "Stopped." in out
