"""A hypothesis fuzzer over every subcommand's arguments: nothing typed may crash, hang or damage the store.

Each example is one command line built from a template of the command's options with hostile values in
its slots: NaN, infinities, 10**20, 5,000 digits, empty and blank text, bytes that are not UTF-8 (as
argv hands them over: surrogateescape), lone surrogates, escape sequences, JSON that is almost JSON, and
as paths a FIFO nobody writes, /dev/zero, /dev/null, a folder, an 80 MiB sparse file, nothing at all. It
runs through `main()` in this process under an alarm, and must:

- exit with a code the README's "Exit codes:" line lists, never "an unexpected error";
- say at most one sentence on stderr when it fails (after argparse's usage block), never a traceback;
- finish before the alarm (no hang: FIFOs, /dev/zero and endless durations are refused up front);
- leave the store verifying (`verify` exits 0 at the end).

Options that would legitimately run long with a valid value (`--duration`, `--timeout`, `--agents`) are
given twice: the fuzzed value is still parsed and checked, the second, short one is what runs.
`gui` and `demo` open a window and are left out. Bounded: `FUZZ_EXAMPLES` examples (default 150,
derandomized, so CI sees the same ones; `FUZZ_RANDOM=1` draws new ones), well under a minute here.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdesk.cli.main import main
from agentdesk.store.persistence.database import open_store
from agentdesk.store.runtime import AgentRuntime

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))
ALARM_S = 30


def documented_codes() -> set[int]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    line = text[text.index("Exit codes:"):].split("\n\n", 1)[0]
    return {int(n) for n in re.findall(r"(?<![\w.])(\d+) [a-z]", line)}


NUMBERS = ["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e400", "-1e400", "100000000000000000000",
           "-100000000000000000000", "9" * 5000, "0", "-0", "-1", "1", "0.5", "1e-320", "", " ", "1_000", "0x10",
           "\udcff", "\u0665", "12abc", "2**63", "9223372036854775808", "86401", "3"]
TEXTS = ["", " ", "\udcff\udcfe", "ok\udcc3", "\ud800", "\x1b[31mred\x1b[0m", "\u202eevil", "\x00", "x" * 5000,
         "{}", '{"a": "\\ud800"}', '{"a": "\\ud83d\\ude80"}', "null", "[", "-", "--", "@", "kind:tool", "dur>nan",
         "status:", "key:", "a" * 300, "\u2028\u2029", "*", "ls", "git status *"]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[str]]]:
    """A store with a run, spans, an approval, plus special files for the path slots (function-scoped: the
    store and every command share the test's audit key folder)."""
    root = tmp_path
    monkeypatch.setenv("AGENTDESK_STATE_DIR", str(root / "state"))
    store_path = root / "agentdesk.sqlite"
    store = open_store(str(store_path))
    rt = AgentRuntime(store)
    project = rt.create_project("Fuzz")
    agent = rt.create_agent(rt.create_session(rt.create_task(project, "t"), "s"), "fuzzer", "m")
    run = rt.start_run(agent, "run")
    for n in range(5):
        rt.finish_span(rt.start_span(run, "tool", f"step {n}"))
    approval = rt.request_approval(run, "shell", {"cmd": "ls"})
    other = rt.start_run(agent, "other")
    store.close()
    fifo = root / "fifo"
    os.mkfifo(fifo)
    folder = root / "folder"
    folder.mkdir()
    sparse = root / "sparse.json"
    with sparse.open("wb") as handle:
        handle.truncate(80 * 1024**2)  # past every read limit (1 MB of arguments, 64 MiB a record), quick to read
    trace = root / "trace.json"
    trace.write_text('{"resourceSpans": []}')
    bad = root / "bad.json"
    bad.write_bytes(b'{"resourceSpans": [\xff\xfe]}')
    paths = [str(fifo), "/dev/zero", "/dev/null", str(folder), str(sparse), str(trace), str(bad),
             str(root / "absent" / "x"), str(root / "new.json"), "", "\udcff", str(root / "link")]
    os.symlink(trace, root / "link")
    yield {"store": [str(store_path)], "paths": paths, "ids": [run, other, approval, "x", "", "\udcff"],
           "runs": [run, other]}


N, T, P, ID = "{N}", "{T}", "{P}", "{I}"
TEMPLATES: list[list[str]] = [
    ["--busy-timeout", N, "info"], ["info", "--json"], ["init"],
    ["approvals", "--limit", N], ["approvals", "--status", T], ["approvals", "--json", "--raw", "--status", "all"],
    ["approve", ID, "--actor", T, "--reason", T], ["approve", ID, "--actor", "ops", "--args", T],
    ["approve", ID, "--actor", "ops", "--args", "@" + P], ["approve", ID, "--actor", "ops", "--expect-hash", T],
    ["deny", ID, "--actor", T, "--reason", T],
    ["watch", "--count", N, "--timeout", N, "--timeout", "0.1"], ["watch", "--since", N, "--timeout", "0.1"],
    ["simulate", "--agents", N, "--agents", "1", "--duration", N, "--duration", "0.2", "--speed", "50"],
    ["simulate", "--seed", N, "--approval-timeout", N, "--speed", N, "--speed", "50", "--agents", "1",
     "--duration", "0.2"],
    ["verify", "--anchor", P], ["verify", "--json"], ["audit", "export", "-o", P],
    ["audit", "key", "export", "-o", P], ["audit", "key", "import", P], ["audit", "key", "import", "--sign", P],
    ["rules", "add", "--tool", T, "--command", T, "--actor", T, "--expires-in", N, "--note", T],
    ["rules", "add", "--tool", "x", "--matcher", T, "--actor", "a"],
    ["rules", "add", "--tool", "x", "--command", "ls", "--field", T, "--actor", "a"],
    ["rules", "add", "--from-approval", ID, "--actor", "a", "--effect", T],
    ["rules", "remove", ID, "--actor", T, "--revision", N], ["rules", "test", ID, "--limit", N],
    ["rules", "list", "--json"],
    ["asks", "--limit", N], ["asks", "--status", T, "--json"], ["answer", ID, T, "--as", T],
    ["answer", ID, "--option", N, "--actor", "ops"],
    ["import", "--quiet", P, "--project", T],
    ["import", "--quiet", "--max-string-mb", N, "--max-decompressed-mb", N, P],
    ["export", ID, "-o", P], ["export", "--project", T], ["export", ID, "--format", T],
    ["search", T, "--limit", N], ["search", T, "--run", ID], ["search", T, "--json"],
    ["critical-path", ID, "--limit", N], ["critical-path", ID, "--json"], ["diff", ID, ID], ["diff", ID, ID, "--json"],
    ["admin", "prune", "--keep-days", N], ["admin", "role", "list"], ["admin", "role", "grant", T, T],
    ["receive", "--port", N, "--port", "0", "--max-body-mb", N, "--spool-mb", N, "--every", N, "--every", "0.1",
     "--duration", N, "--duration", "0.2", "--header-timeout", N, "--body-timeout", N],
    ["--store", P, "info"], ["--store", P, "approvals"], ["--store", P, "verify"], ["--store", T, "info"],
    [T], [T, T], ["--" + "x" * 30],
]


@st.composite
def command_lines(draw: st.DrawFn, world: dict[str, list[str]]) -> list[str]:
    template = draw(st.sampled_from(TEMPLATES))
    numbers = st.one_of(st.sampled_from(NUMBERS), st.integers(-(2**70), 2**70).map(str),
                        st.floats(allow_nan=True, allow_infinity=True).map(repr))
    texts = st.one_of(st.sampled_from(TEXTS), st.text(max_size=40),
                      st.binary(max_size=12).map(os.fsdecode))  # argv's bytes, as Python decodes them
    pools = {N: numbers, T: texts, P: st.sampled_from(world["paths"]),
             ID: st.one_of(st.sampled_from(world["ids"]), texts)}
    argv = [draw(pools[word]) if word in pools else word for word in template]
    return ["--store", world["store"][0], *argv] if "--store" not in template else argv


class Hang(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang


def run_one(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(ALARM_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except Hang:
        pytest.fail(f"no answer within {ALARM_S} s: {argv!r}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return code, err.getvalue()


def test_no_command_line_crashes_hangs_or_damages_the_store(world: dict[str, list[str]]) -> None:
    documented = documented_codes()
    assert documented >= {0, 2, 3, 4, 5, 6, 7}

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("FUZZ_RANDOM"), database=None,
              suppress_health_check=list(HealthCheck))
    @given(command_lines(world))
    def check(argv: list[str]) -> None:
        code, err = run_one(argv)
        lines = err.splitlines()
        usage = [n for n, line in enumerate(lines) if line.startswith("usage:")]
        said = lines[-1:] if usage == [0] and code == 2 else [ln for ln in lines if ln.startswith("agentdesk")]
        assert code in documented, (argv, code, err)
        assert "Traceback" not in err and "unexpected error" not in err, (argv, err)
        if code != 0:
            assert len(said) == 1 and said[0].startswith("agentdesk"), (argv, err)

    check()
    code, err = run_one(["--store", world["store"][0], "verify"])
    assert code == 0, err
    conn = sqlite3.connect(f"file:{world['store'][0]}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
