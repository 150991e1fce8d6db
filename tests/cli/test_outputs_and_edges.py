"""Outputs never replace what they do not own; and the smaller edges of issue 26.

`export -o` and `audit export -o` write a regular file whole (a temporary beside it, renamed), stream to a
device or a FIFO without replacing it, refuse a folder or a link to a file in one sentence naming the
output; a store that lost its audit table is tampering (exit 6), not "another schema"; JSON written to a
terminal shows hidden characters as escapes.
"""

from __future__ import annotations

import json
import os
import pty
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agentdesk.cli.main import main
from agentdesk.cli.output import TerminalJson
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import World

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def closed_store(store: Store, store_path: Path, rt: AgentRuntime, world: World) -> tuple[Path, str]:
    span = rt.start_span(world.run, "tool", "say \u202eevil\u2028 \u200b\x85 \U000e0041 \x7f")
    rt.finish_span(span)
    store.close()
    return store_path, world.run


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    said = capsys.readouterr()
    return code, said.out, said.err


COMMANDS = {"export": ("export", "RUN", "-o"), "audit export": ("audit", "export", "-o")}


def command(name: str, store: Path, run_id: str, output: Path) -> list[str]:
    return ["--store", str(store), *[run_id if word == "RUN" else word for word in COMMANDS[name]], str(output)]


@pytest.mark.sqlite_only
@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_regular_file_is_replaced_whole_and_nothing_is_left_beside_it(
        name: str, closed_store: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, run_id = closed_store
    target = tmp_path / "out" / "run.json"
    target.parent.mkdir()
    target.write_text("old")
    os.chmod(target, 0o640)
    code, _, err = run(capsys, *command(name, store, run_id, target))
    assert code == 0, err
    assert target.read_text() != "old" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in target.parent.iterdir()) == ["run.json"]


@pytest.mark.sqlite_only
@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_fifo_is_streamed_to_and_stays_a_fifo(name: str, closed_store: tuple[Path, str], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    store, run_id = closed_store
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, _, err = run(capsys, *command(name, store, run_id, fifo))  # nobody reads it yet
    assert code == 2 and "nobody is reading" in err, err
    reading = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, there before the writer opens
    try:
        code, _, err = run(capsys, *command(name, store, run_id, fifo))  # a few KB: the pipe's buffer holds it
        got = [os.read(reading, 1 << 20)]
    finally:
        os.close(reading)
    assert code == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and got and got[0].strip()


@pytest.mark.sqlite_only
@pytest.mark.parametrize("name", list(COMMANDS))
def test_dev_null_is_written_to_not_replaced(name: str, closed_store: tuple[Path, str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    store, run_id = closed_store
    before = os.stat("/dev/null")
    code, _, err = run(capsys, *command(name, store, run_id, Path("/dev/null")))
    assert code == 0, err
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


@pytest.mark.sqlite_only
@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.parametrize("kind", ["folder", "link to a file", "link to nothing", "missing folder"])
def test_what_cannot_be_written_safely_is_refused_naming_the_output(
        name: str, kind: str, closed_store: tuple[Path, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    store, run_id = closed_store
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    output = tmp_path / "out"
    if kind == "folder":
        output.mkdir()
    elif kind == "link to a file":
        output.symlink_to(precious)
    elif kind == "link to nothing":
        output.symlink_to(tmp_path / "nowhere")
    else:
        output = tmp_path / "absent" / "out.json"
    code, _, err = run(capsys, *command(name, store, run_id, output))
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"The output {output}" in err and "could not be used" not in err
    assert precious.read_text() == "keep me"
    if kind.startswith("link"):
        assert output.is_symlink()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]


def test_a_write_failure_is_one_sentence_naming_the_output(tmp_path: Path) -> None:
    """A device that refuses the bytes (here a FIFO whose reader left: EPIPE, standing in for /dev/full)."""
    from agentdesk.cli.outfile import OutputRefused, output_file

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    with pytest.raises(OutputRefused, match=f"The output {fifo} could not be written"), output_file(fifo) as handle:
        os.close(reader)
        handle.write("x" * 1_000_000)
        handle.flush()


def test_json_for_a_terminal_escapes_hidden_characters_and_still_parses() -> None:
    class Sink:
        text = ""

        def write(self, s: str) -> int:
            Sink.text += s
            return len(s)

        def flush(self) -> None:
            pass

    value = {"name": "a\u202eb\u2028c\u200bd\x85e\U000e0041f\x7fg é"}
    TerminalJson(Sink()).write(json.dumps(value, ensure_ascii=False) + "\n")
    assert json.loads(Sink.text) == value
    assert all(ch not in Sink.text for ch in "\u202e\u2028\u200b\x85\U000e0041\x7f") and "é" in Sink.text


@pytest.mark.sqlite_only
def test_export_on_a_terminal_goes_through_the_escapes_and_raw_gives_bytes(closed_store: tuple[Path, str],
                                                                          tmp_path: Path) -> None:
    store, run_id = closed_store
    outputs = {}
    for raw in (False, True):
        controller, terminal = pty.openpty()
        env = dict(os.environ, PYTHONPATH=str(REPO), AGENTDESK_STATE_DIR=str(tmp_path / "state"))
        proc = subprocess.Popen([sys.executable, "-m", "agentdesk.cli", "--store", str(store), "export", run_id,
                                 *(["--raw"] if raw else [])], stdout=terminal, stderr=subprocess.PIPE, env=env,
                                cwd=REPO)
        os.close(terminal)
        data = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            data += chunk
        proc.wait(60)
        os.close(controller)
        outputs[raw] = data.decode("utf-8")
    assert "\u202e" not in outputs[False] and "\\u202e" in outputs[False]
    assert "\u202e" in outputs[True]


@pytest.mark.sqlite_only
def test_a_store_that_lost_its_audit_table_is_tampered_not_another_schema(
        closed_store: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    store, _ = closed_store
    assert run(capsys, "--store", str(store), "verify")[0] == 0  # the anchor has seen the log
    conn = sqlite3.connect(store)
    conn.execute("DROP TABLE audit_log")
    conn.commit()
    conn.close()
    code, _, err = run(capsys, "--store", str(store), "verify")
    assert code == 6 and "The audit table is gone" in err, err
    code, _, err = run(capsys, "--store", str(store), "rules", "add", "--tool", "x", "--command", "ls",
                       "--actor", "a")
    assert code == 6 and "lost its audit table" in err, err
    assert run(capsys, "--store", str(store), "info")[0] == 0


def without_dac_override() -> None:
    """Root minus CAP_DAC_OVERRIDE, so file modes bind the child (tests run as root here)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if os.geteuid() == 0 and libc.prctl(24, 1, 0, 0, 0) != 0:  # PR_CAPBSET_DROP, CAP_DAC_OVERRIDE
        raise OSError(ctypes.get_errno(), "prctl failed")


@pytest.mark.sqlite_only
def test_the_window_opens_a_store_it_cannot_write_read_only(closed_store: tuple[Path, str], tmp_path: Path) -> None:
    """What a read-only mount does, made with modes: the window opens the store read-only, as the CLI reads it."""
    store, run_id = closed_store
    for leftover in store.parent.glob(store.name + "-*"):
        leftover.unlink()
    store.chmod(0o444)
    store.parent.chmod(0o555)
    shot = tmp_path.parent / f"{tmp_path.name}-shot.png"
    env = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen",
               AGENTDESK_STATE_DIR=str(tmp_path.parent / f"{tmp_path.name}-state"))
    try:
        result = subprocess.run([sys.executable, "-m", "agentdesk.cli", "--store", str(store), "gui", "--screenshot",
                                 str(shot), "--view", "timeline", "--select", run_id], env=env, cwd=REPO,
                                capture_output=True, text=True, timeout=180, preexec_fn=without_dac_override)
    finally:
        store.parent.chmod(0o755)
        store.chmod(0o644)
    assert result.returncode == 0, result.stderr
    assert shot.stat().st_size > 0


@pytest.mark.sqlite_only
@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_store_itself_is_never_the_output(name: str, closed_store: tuple[Path, str],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    store, run_id = closed_store
    before = store.read_bytes()
    code, _, err = run(capsys, *command(name, store, run_id, store))
    assert code == 2 and "is the store itself" in err, err
    assert store.read_bytes() == before


@pytest.mark.parametrize("kind", ["folder", "link to a file", "named pipe nobody reads"])
def test_a_screenshot_path_is_checked_before_the_window_starts(kind: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "shot.png"
    if kind == "folder":
        output.mkdir()
    elif kind == "link to a file":
        (tmp_path / "precious.png").write_bytes(b"keep")
        output.symlink_to(tmp_path / "precious.png")
    else:
        os.mkfifo(output)
    code, _, err = run(capsys, "--store", str(tmp_path / "absent.sqlite"), "gui", "--screenshot", str(output))
    assert code == 2 and f"The output {output}" in err, err
