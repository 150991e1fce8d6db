"""First-run wording of the CLI: the display check before Qt, usage errors with a "did you mean", help text
for every option, `--version`, and `watch` explaining a reset."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from agentdesk import __version__
from agentdesk.cli import display
from agentdesk.cli import main as cli
from agentdesk.cli import output as out
from agentdesk.cli.parser import build_parser
from agentdesk.store.persistence.bus import Change, ChangeOp
from agentdesk.store.persistence.database import Store
from tests.conftest import World


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


# -- the display check ------------------------------------------------------------------------
def test_no_display_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    assert display.display_problem({}, platform="linux") == display.NO_DISPLAY
    assert display.display_problem({"DISPLAY": ":987"}, platform="linux") == display.NO_DISPLAY  # no server
    assert display.display_problem({"QT_QPA_PLATFORM": "offscreen"}, platform="linux") is None
    assert display.display_problem({}, platform="darwin") is None
    assert display.display_problem({"WAYLAND_DISPLAY": "wayland-0"}, platform="linux") is None


def test_missing_xcb_libraries_name_the_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(display, "x_server_reachable", lambda _display: True)
    missing = {"libxcb-icccm.so.4", "libxcb-keysyms.so.1"}
    monkeypatch.setattr(display, "loadable", lambda soname, _bundled: soname not in missing)
    problem = display.display_problem({"DISPLAY": ":0"}, platform="linux")
    assert problem is not None
    assert "sudo apt-get install libxcb-icccm4 libxcb-keysyms1`" in problem
    assert "sudo dnf install xcb-util-wm xcb-util-keysyms`" in problem
    assert "libxcb-icccm.so.4 and libxcb-keysyms.so.1" in problem
    monkeypatch.setattr(display, "loadable", lambda soname, _bundled: True)
    assert display.display_problem({"DISPLAY": ":0"}, platform="linux") is None


def test_every_soname_the_xcb_plugin_needs_is_in_the_table() -> None:
    """The table is checked against the plugin itself, where the ELF can be read (Linux wheels)."""
    import importlib.util

    spec = importlib.util.find_spec("PySide6")
    plugin = Path(next(iter(spec.submodule_search_locations or []))) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    if not plugin.exists():
        pytest.skip("no xcb plugin in this PySide6 (not Linux)")
    data = plugin.read_bytes()
    known = {lib.soname for lib in display.XCB_LIBRARIES}
    for needed in ("libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxkbcommon-x11.so.0"):
        assert needed.encode() in data and needed in known


def test_gui_and_demo_refuse_without_a_display_and_leave_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cli.tempfile, "tempdir", str(tmp_path))
    code, _, err = run(capsys, "demo")
    assert code == 5 and err == f"agentdesk: {display.NO_DISPLAY}\n"
    assert list(tmp_path.iterdir()) == []  # refused before the demo made its store
    code, _, err = run(capsys, "--store", str(tmp_path / "x.sqlite"), "gui")
    assert code == 5 and err == f"agentdesk: {display.NO_DISPLAY}\n"


# -- usage errors -----------------------------------------------------------------------------
@pytest.mark.parametrize(("argv", "sentence"), [
    (["aprovals"], "agentdesk: There is no command 'aprovals'; did you mean approvals?"),
    (["approvals", "--jsn"], "agentdesk approvals: There is no option --jsn here; did you mean --json?"),
    (["approvals", "--status", "pendng"],
     "agentdesk approvals: --status cannot be 'pendng' (it is one of pending, approved, denied, expired, "
     "withdrawn, all); did you mean pending?"),
    (["rules", "ad"], "agentdesk rules: There is no action 'ad'; did you mean add?"),
    (["approve", "apr_1"], "agentdesk approve: Missing --actor; `agentdesk approve --help` describes it."),
    (["approve", "", "--actor", "ann"],
     "agentdesk approve: An approval id is needed, and this one is empty (`agentdesk approvals` lists the "
     "pending ones)."),
    (["approvals", "--limit", "0"], "agentdesk approvals: --limit: must be positive, not 0."),
    (["--store"], "agentdesk: --store needs a value."),
])
def test_usage_errors_end_in_one_sentence(argv: list[str], sentence: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2 and last_line(err) == sentence
    assert err.startswith("usage: ")


def test_a_blank_actor_is_refused_in_plain_english(store_path: Path, store: Store, world: World,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--store", str(store_path), "approve", world.approval, "--actor", " ")
    assert code == 2 and err == "agentdesk: An actor name is required.\n"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, text, _ = run(capsys, "--version")
    assert code == 0 and text.startswith(f"agentdesk {__version__} (checkout: ")  # the tests run from source


@pytest.mark.parametrize(("package", "frozen", "prefix", "base", "kind"), [
    ("/opt/agentdesk/_internal/agentdesk", True, "/x", "/x", "bundle"),
    ("/home/u/.local/share/pipx/venvs/agentdesk/lib/python3.12/site-packages/agentdesk", False,
     "/home/u/.local/share/pipx/venvs/agentdesk", "/usr", "pipx"),
    ("/srv/venv/lib/python3.12/site-packages/agentdesk", False, "/srv/venv", "/usr", "virtualenv"),
    ("/usr/lib/python3/dist-packages/agentdesk", False, "/usr", "/usr", "system"),
    ("/work/agentdesk/agentdesk", False, "/srv/venv", "/usr", "checkout"),
])
def test_version_names_the_install(package: str, frozen: bool, prefix: str, base: str, kind: str) -> None:
    from agentdesk.cli.install import install_kind

    assert install_kind(Path(package), frozen=frozen, prefix=prefix, base_prefix=base)[0] == kind


def walk(parser: argparse.ArgumentParser, path: str = "agentdesk") -> list[tuple[str, argparse.Action]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += walk(sub, f"{path} {name}")
        else:
            found.append((path, action))
    return found


def test_every_option_has_help_text() -> None:
    parser = build_parser(dict.fromkeys(cli.HANDLERS, cli.cmd_info))
    actions = walk(parser)
    assert len(actions) > 80
    missing = [f"{path} {'/'.join(a.option_strings) or a.dest}" for path, a in actions
               if not a.help]
    assert missing == []


def test_watch_explains_a_reset_in_words() -> None:
    line = out.change_line(Change(entity="*", op=ChangeOp.RESET, id="", seq=None, at=0.0))
    assert "reset: the change feed was interrupted" in line and "missed" in line
