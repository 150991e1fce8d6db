"""Every CLI command against every kind of bad input, in subprocesses: the README's exit code, no traceback.

The README's table is parsed here, so a code the table does not list fails the test even
when a case's expected code was written wrong. Stores are built once per module; each case
runs `python -m agentdesk.cli` as a script would, a few at a time.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PARALLEL = 3


def documented_codes() -> set[int]:
    """The exit codes the README's "Exit codes:" line lists."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    line = text[text.index("Exit codes:"):].split("\n\n", 1)[0]
    return {int(n) for n in re.findall(r"(?<![\w.])(\d+) [a-z]", line)}


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    code: int
    stdin: bytes | None = None


@dataclass
class Outcome:
    case: Case
    code: int
    stdout: str
    stderr: str


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Bad stores and bad input files, plus one good store."""
    root = tmp_path_factory.mktemp("matrix")
    env = cli_env(root)
    good = root / "good.sqlite"
    subprocess.run([sys.executable, "-m", "agentdesk.cli", "--store", str(good), "init"], env=env, check=True,
                   capture_output=True, cwd=REPO)
    made: dict[str, Path] = {"good": good, "root": root}

    def bad(name: str, data: bytes) -> None:
        made[name] = root / name
        made[name].write_bytes(data)

    bad("garbage.sqlite", os.urandom(64 * 1024))
    bad("text.sqlite", b"this is not a database\n" * 100)
    bad("utf8.sqlite", b"\xff\xfe\xfa not utf-8 \xc3\x28" * 100)
    bad("nested.json", b"[" * 50_000 + b"]" * 50_000)
    bad("nested_object.json", b'{"a":' * 50_000 + b"1" + b"}" * 50_000)
    bad("surrogate.json", b'{"command": "\\ud800 lone"}')
    bad("garbage.json", os.urandom(4096))
    bad("invalid_utf8.json", b'{"command": "\xff\xfe"}')
    bad("empty.json", b"")
    huge = root / "huge.json"
    with huge.open("wb") as handle:  # sparse: 3 GB on paper, nothing on disk
        handle.truncate(3 * 1024**3)
    made["huge.json"] = huge
    biggish = root / "biggish.json"
    with biggish.open("wb") as handle:
        handle.truncate(20 * 1024**2)
    made["biggish.json"] = biggish
    header = good.read_bytes()[:100]
    bad("corrupt.sqlite", header + os.urandom(8192))
    made["folder"] = root / "folder.sqlite"
    made["folder"].mkdir()
    other = root / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    made["other.sqlite"] = other
    for name, sql in [("no_approvals.sqlite", "DROP TABLE approvals"),
                      ("no_column.sqlite", "ALTER TABLE approvals DROP COLUMN reason"),
                      ("newer.sqlite", "UPDATE alembic_version SET version_num = '9999_from_the_future'")]:
        made[name] = root / name
        made[name].write_bytes(good.read_bytes())
        conn = sqlite3.connect(made[name])
        conn.execute(sql)
        conn.commit()
        conn.close()
    locked = root / "locked.sqlite"
    locked.write_bytes(good.read_bytes())
    made["locked.sqlite"] = locked
    return made


@pytest.fixture(scope="module")
def holding(files: dict[str, Path]) -> Iterator[None]:
    """The locked store, held: exclusive locking mode and a write, so no other process can read it."""
    conn = sqlite3.connect(files["locked.sqlite"], isolation_level=None)
    conn.execute("PRAGMA locking_mode=EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("UPDATE projects SET name = name")
    yield
    conn.execute("ROLLBACK")
    conn.close()


def cli_env(root: Path) -> dict[str, str]:
    return dict(os.environ, AGENTDESK_STORE=str(root / "no-default-store.sqlite"),
                AGENTDESK_STATE_DIR=str(root / "state"), PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen")


DRIVER = """
import contextlib, io, json, sys, traceback
from agentdesk.cli.main import main
results = []
for argv in json.loads(sys.stdin.read()):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # main must never let one out, but report it rather than stop
            code = exc.code if isinstance(exc.code, int) else 99
        except BaseException:
            code, _ = 98, err.write(traceback.format_exc())
    results.append([code, out.getvalue()[-2000:], err.getvalue()])
print(json.dumps(results))
"""
DRIVERS = 2 * PARALLEL
"""Driver processes sharing the batched cases: Python's start-up is most of a case's cost, so few processes,
each running many commands; the cases are dealt round-robin so the slow ones (the locked store's busy
timeout) are spread over all of them."""


def run_group(group: list[Case], env: dict[str, str]) -> list[Outcome]:
    """One process: a case needing stdin alone (`python -m agentdesk.cli`), else the driver over the group."""
    if group[0].stdin is not None:
        argv = [sys.executable, "-m", "agentdesk.cli", *group[0].argv]
        feed = group[0].stdin
    else:
        argv = [sys.executable, "-c", DRIVER]
        feed = json.dumps([list(c.argv) for c in group]).encode()
    proc = subprocess.run(argv, cwd=REPO, env=env, input=feed, capture_output=True, timeout=300)
    if group[0].stdin is not None:
        return [Outcome(group[0], proc.returncode, proc.stdout.decode(errors="replace"),
                        proc.stderr.decode(errors="replace"))]
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    return [Outcome(case, code, stdout, stderr)
            for case, (code, stdout, stderr) in zip(group, json.loads(proc.stdout), strict=True)]


def run_all(cases: list[Case], root: Path) -> list[Outcome]:
    """Run the cases in subprocesses, `PARALLEL` at a time: those needing stdin one each, the rest dealt
    over `DRIVERS` driver processes (a fresh `main()` call each, stdout and stderr captured apart)."""
    env = cli_env(root)
    batched = [c for c in cases if c.stdin is None]
    groups = [[c] for c in cases if c.stdin is not None]
    groups += [batched[n::DRIVERS] for n in range(DRIVERS) if batched[n::DRIVERS]]
    with ThreadPoolExecutor(PARALLEL) as pool:
        outcomes = {o.case: o for done in pool.map(lambda g: run_group(g, env), groups) for o in done}
    return [outcomes[c] for c in cases]


def store_commands(store: Path) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Every command that opens the store, with arguments that would be fine on a good one."""
    s = ("--store", str(store), "--busy-timeout", "0.5")
    yield "init", (*s, "init")
    yield "simulate", (*s, "simulate", "--agents", "1", "--duration", "0.5", "--speed", "50")
    yield "approvals", (*s, "approvals")
    yield "approvals --json", (*s, "approvals", "--json", "--status", "all")
    yield "approve", (*s, "approve", "apr_0000000000000000", "--actor", "ops")
    yield "deny", (*s, "deny", "apr_0000000000000000", "--actor", "ops", "--reason", "no")
    yield "info", (*s, "info")
    yield "info --json", (*s, "info", "--json")
    yield "verify", (*s, "verify")
    yield "watch", (*s, "watch", "--timeout", "0.5")
    yield "rules list", (*s, "rules", "list")
    yield "rules add", (*s, "rules", "add", "--tool", "Bash", "--command", "ls", "--actor", "ops")
    yield "rules remove", (*s, "rules", "remove", "rul_0000000000000000", "--actor", "ops")
    yield "rules test", (*s, "rules", "test", "rul_0000000000000000")
    yield "rules apply", (*s, "rules", "apply")
    yield "export", (*s, "export", "run_0000000000000000")


BAD_STORES = {
    "garbage.sqlite": 5, "text.sqlite": 5, "utf8.sqlite": 5, "corrupt.sqlite": 5, "folder": 5, "other.sqlite": 5,
    "no_approvals.sqlite": 5, "no_column.sqlite": 5, "newer.sqlite": 5, "nested.json": 5, "huge.json": 5,
    "locked.sqlite": 5,
}


def cases(files: dict[str, Path]) -> list[Case]:
    found = [Case(f"{store} / {name}", argv, code)
             for store, code in BAD_STORES.items() for name, argv in store_commands(files[store])]
    missing = files["root"] / "absent.sqlite"
    found += [Case(f"absent / {name}", argv, 5) for name, argv in store_commands(missing)
              if name not in ("init", "simulate", "rules add", "rules remove")]  # writers create a new store
    good = ("--store", str(files["good"]))
    approve = (*good, "approve", "apr_0000000000000000", "--actor", "ops", "--args")
    found += [
        # the window refuses a bad store before Qt starts; its own process each (stdin given: never batched)
        Case("gui: garbage store", ("--store", str(files["garbage.sqlite"]), "gui", "--screenshot",
                                    str(files["root"] / "g.png")), 5, b""),
        Case("gui: store without approvals", ("--store", str(files["no_approvals.sqlite"]), "gui", "--screenshot",
                                              str(files["root"] / "n.png")), 5, b""),
        Case("unknown approval", (*good, "approve", "apr_0000000000000000", "--actor", "ops"), 4),
        Case("unknown approval (deny)", (*good, "deny", "apr_0000000000000000", "--actor", "o", "--reason", "r"), 4),
        Case("unknown run (export)", (*good, "export", "run_0000000000000000"), 4),
        Case("unknown rule (remove)", (*good, "rules", "remove", "rul_0000000000000000", "--actor", "ops"), 4),
        Case("unknown rule (test)", (*good, "rules", "test", "rul_0000000000000000"), 4),
        Case("unknown command", (*good, "frobnicate"), 2),
        Case("bad option value", (*good, "approvals", "--status", "bogus"), 2),
        Case("bad busy timeout", (*good, "--busy-timeout", "soon", "info"), 2),
        Case("zero agents", (*good, "simulate", "--agents", "0"), 2),
        Case("args: huge file", (*approve, f"@{files['huge.json']}"), 2),
        Case("args: 50,000 levels", (*approve, f"@{files['nested.json']}"), 2),
        Case("args: 50,000 levels of objects", (*approve, f"@{files['nested_object.json']}"), 2),
        Case("args: garbage", (*approve, f"@{files['garbage.json']}"), 2),
        Case("args: invalid UTF-8", (*approve, f"@{files['invalid_utf8.json']}"), 2),
        Case("args: empty file", (*approve, f"@{files['empty.json']}"), 2),
        Case("args: a folder", (*approve, f"@{files['folder']}"), 2),
        Case("args: no such file", (*approve, f"@{files['root'] / 'absent.json'}"), 2),
        Case("args: /dev/zero", (*approve, "@/dev/zero"), 2),
        Case("args: not JSON", (*approve, "{nope"), 2),
        Case("args: stdin 50,000 levels", (*approve, "-"), 2, b"[" * 50_000 + b"]" * 50_000),
        Case("args: stdin 3 MB", (*approve, "-"), 2, b'"' + b"x" * 3_000_000 + b'"'),
        Case("args: stdin invalid UTF-8", (*approve, "-"), 2, b'{"a": "\xff"}'),
        Case("args: a lone surrogate escape", (*approve, f"@{files['surrogate.json']}"), 2),
        Case("rules: matcher 50,000 levels",
             (*good, "rules", "add", "--tool", "Bash", "--matcher", "[" * 30_000 + "]" * 30_000, "--actor", "o"), 2),
        Case("rules: matcher garbage", (*good, "rules", "add", "--tool", "Bash", "--matcher", "{x", "--actor", "o"), 2),
        Case("rules: field 50,000 levels", (*good, "rules", "add", "--tool", "Bash", "--command", "ls", "--field",
                                            "a=" + "[" * 30_000 + "]" * 30_000, "--actor", "o"), 2),
        Case("rules: from an unknown approval",
             (*good, "rules", "add", "--from-approval", "apr_0000000000000000", "--actor", "o"), 4),
        Case("import: 50,000 levels", (*good, "import", "--quiet", str(files["nested.json"])), 2),
        Case("import: 50,000 levels of objects", (*good, "import", "--quiet", str(files["nested_object.json"])), 2),
        Case("import: garbage", (*good, "import", "--quiet", str(files["garbage.json"])), 2),
        Case("import: 20 MB of zeros", (*good, "import", "--quiet", str(files["biggish.json"])), 2),
        Case("import: a folder", (*good, "import", "--quiet", str(files["folder"])), 2),
        Case("import: no such file", (*good, "import", "--quiet", str(files["root"] / "absent.json")), 2),
        Case("import: empty file", (*good, "import", "--quiet", str(files["empty.json"])), 2),
    ]
    return found


def test_every_bad_input_gets_its_documented_code_and_one_sentence(files: dict[str, Path], holding: None) -> None:
    documented = documented_codes()
    assert documented >= {0, 2, 3, 4, 5, 6}, documented
    wrong = []
    for o in run_all(cases(files), files["root"]):
        lines = o.stderr.splitlines()
        problems = []
        if o.code != o.case.code:
            problems.append(f"exit {o.code}, expected {o.case.code}")
        if o.code not in documented:
            problems.append(f"exit {o.code} is not in the README's table")
        if "Traceback" in o.stderr:
            problems.append("a traceback")
        usage = [n for n, line in enumerate(lines) if line.startswith("usage:")]
        said = lines[-1:] if usage == [0] and o.code == 2 else lines  # argparse's usage, then its one sentence
        if o.code != 0 and (len(said) != 1 or not said[0].startswith("agentdesk")):
            problems.append(f"{len(said)} stderr lines")
        if problems:
            wrong.append(f"{o.case.name}: {', '.join(problems)}: {o.stderr.strip()[:300]!r}")
    assert not wrong, f"{len(wrong)} cases:\n" + "\n".join(wrong)


def test_nothing_was_written_to_a_refused_store(files: dict[str, Path]) -> None:
    """The refused agentdesk stores still have exactly what they had (no half-written simulation)."""
    for name in ("no_approvals.sqlite", "no_column.sqlite"):
        conn = sqlite3.connect(f"file:{files[name]}?mode=ro", uri=True)
        try:
            assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0, name
        finally:
            conn.close()


def test_an_unexpected_error_names_its_log(tmp_path: Path) -> None:
    """The top-level handler: a bug becomes one sentence (exit 5) naming a log that holds the traceback."""
    env = cli_env(tmp_path)
    code = ("import sys; from agentdesk.cli import main as m; "
            "m.HANDLERS['info'] = lambda args: 1 / 0; sys.exit(m.main(['--store', sys.argv[1], 'info']))")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.sqlite")], env=env, cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 5, result.stderr
    (line,) = result.stderr.splitlines()
    assert "ZeroDivisionError" in line and "Traceback" not in result.stderr
    log = Path(line.rsplit(" is in ", 1)[1].rstrip("."))
    assert log.parent == tmp_path / "state" and "Traceback" in log.read_text()


def test_lone_surrogates_print_as_escapes(tmp_path: Path) -> None:
    """Valid JSON with a lone surrogate escape, printed raw: escaped, not UnicodeEncodeError."""
    from tests.store.sources.fixtures_stageflow import build_stageflow_fixture

    path = tmp_path / "stageflow.db"
    ids = build_stageflow_fixture(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE agent_approvals SET payload_json = ?, tool = CAST(? AS TEXT) WHERE approval_id = ?",
                     (json.dumps({"cmd": "\ud800"}), b"tool\xed\xb3\xbf", ids["pending_approval"]))
    outcomes = run_all([Case("json", ("--store", str(path), "approvals", "--json"), 0),
                        Case("raw", ("--store", str(path), "approvals", "--json", "--raw"), 0),
                        Case("table", ("--store", str(path), "approvals", "--raw"), 0)], tmp_path)
    for o in outcomes:
        assert o.code == 0 and not o.stderr, (o.case.name, o.stderr)
        assert ids["pending_approval"] in o.stdout
