"""The first things a new user meets in the window: File menu, Quit, a size that fits, the icon, and the
status bar saying when agents wait on them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QSize
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication

from agentdesk.gui.ingest.dialog import ImportDialog
from agentdesk.gui.window import file_menu
from agentdesk.gui.window.main_window import CENTRE_MIN_WIDTH, MainWindow, fitting_size
from agentdesk.gui.window.settings import open_settings
from agentdesk.model.services import Services
from agentdesk.model.tasks import spawn
from agentdesk.store.native import NativeSource
from tests.gui.conftest import World


@pytest.fixture(autouse=True)
def own_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(tmp_path / "config"))


def make_window(services: Services, qtbot: Any) -> MainWindow:
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    return window


def test_file_menu_has_open_recent_import_and_quit(services: Services, qtbot: Any) -> None:
    window = make_window(services, qtbot)
    menu = window.menuBar().actions()[0].menu()
    texts = [a.text() for a in menu.actions() if not a.isSeparator()]
    assert texts[0] == "&Open store…" and "Open &recent" in texts
    assert "Import OpenTelemetry traces…" in texts and texts[-1] == "&Quit"
    assert window.quit_action.shortcut() == QKeySequence("Ctrl+Q")


def test_quit_closes_the_window_and_saves_its_layout(services: Services, qtbot: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    window = make_window(services, qtbot)
    quits: list[bool] = []
    monkeypatch.setattr(QApplication, "quit", staticmethod(lambda: quits.append(True)))
    window.quit_action.trigger()
    assert quits == [True] and not window.isVisible()
    assert open_settings().value("window/geometry") is not None


def test_recent_stores_are_remembered_newest_first_and_open_a_new_window(
        services: Services, qtbot: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    started: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(file_menu.QProcess, "startDetached",
                        staticmethod(lambda program, args: started.append((program, list(args))) or True))
    window = make_window(services, qtbot)
    other = str(tmp_path / "other.sqlite")
    NativeSource.open(other).close()
    window.store_menu.open(other)
    qtbot.waitUntil(lambda: bool(started))
    assert started and started[-1][1][-3:] == ["gui", "--store", other]
    assert window.store_menu.recent[:2] == [other, services.source.descriptor.location]
    recent_texts = [a.text() for a in window.store_menu.recent_menu.actions()]
    assert recent_texts == [other] and window.store_menu.recent_menu.isEnabled()
    settings = open_settings()
    assert file_menu.remember(settings, "third")[:3] == ["third", other, services.source.descriptor.location]
    assert len(file_menu.remember(settings, "x")) <= file_menu.MAX_RECENT


@pytest.mark.parametrize("content", [b"not a database", None])
def test_opening_a_bad_store_says_so_in_the_window_and_is_not_remembered(
        services: Services, qtbot: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: bytes | None) -> None:
    started: list[object] = []
    monkeypatch.setattr(file_menu.QProcess, "startDetached", staticmethod(lambda *args: started.append(args)))
    window = make_window(services, qtbot)
    bad = tmp_path / "bad.sqlite"
    if content is not None:
        bad.write_bytes(content)
    window.store_menu.open(str(bad))
    qtbot.waitUntil(window.message_bar.isVisible)
    assert str(bad) in window.message_bar.label.text() and str(bad) in window.status.currentMessage()
    assert started == [] and str(bad) not in window.store_menu.recent
    assert str(bad) not in [a.text() for a in window.store_menu.recent_menu.actions()]
    window.message_bar.close_button.click()
    assert not window.message_bar.isVisible()


def test_a_failed_import_shows_in_the_window_naming_the_file(services: Services, qtbot: Any,
                                                             tmp_path: Path) -> None:
    window = make_window(services, qtbot)
    missing = tmp_path / "gone" / "traces.json"
    dialog = ImportDialog(services, [missing], window)
    dialog.failed.connect(window.report_error)
    dialog.start()
    qtbot.waitUntil(window.message_bar.isVisible)
    assert str(missing) in window.message_bar.label.text()


@pytest.mark.parametrize(("screen", "expected"), [(QSize(1366, 768), QSize(1229, 691)),
                                                   (QSize(3840, 2160), QSize(1600, 1000))])
def test_the_first_size_fits_the_screen(screen: QSize, expected: QSize) -> None:
    assert fitting_size(QSize(1600, 1000), screen) == expected


@pytest.mark.parametrize("width", [1366, 1920])
def test_docks_leave_the_timeline_a_readable_width(services: Services, qtbot: Any, width: int) -> None:
    window = make_window(services, qtbot)
    window.resize(width, 768)
    qtbot.waitUntil(lambda: window.width() == width)
    window._size_docks()
    QApplication.processEvents()
    assert window.tabs.width() >= CENTRE_MIN_WIDTH
    assert window.tree_dock.width() >= 240 and window.queue_dock.width() >= 300


def test_the_window_has_the_app_icon(services: Services, qtbot: Any) -> None:
    window = make_window(services, qtbot)
    assert not window.windowIcon().isNull()
    assert not window.windowIcon().pixmap(64, 64).toImage().isNull()


def test_status_bar_says_how_many_agents_wait(services: Services, world: World, qtbot: Any) -> None:
    window = make_window(services, qtbot)
    window.status.set_pending(5, 3)
    assert window.status.pending_label.text() == "5 pending approvals · 3 agents waiting for you"
    window.status.set_pending(1, 1)
    assert window.status.pending_label.text() == "1 pending approval · 1 agent waiting for you"
    window.status.set_pending(0, 0)
    assert window.status.pending_label.text() == "0 pending approvals"


def test_the_demo_window_jumps_to_the_first_approval(services: Services, world: World, qtbot: Any) -> None:
    window = MainWindow(services)
    window.follow_first_approval = True
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.queue.current_approval() is not None, timeout=5000)
    current = window.queue.current_approval()
    assert current is not None and current.id in world.approval_ids
    assert window.follow_first_approval is False and window.tabs.currentIndex() == 0
    assert window.timeline.run_id == current.run_id  # its run is the one in the timeline


def test_without_the_demo_flag_the_timeline_stays_empty(services: Services, world: World, qtbot: Any) -> None:
    window = make_window(services, qtbot)
    qtbot.waitUntil(lambda: window.queue_dock.windowTitle() == "Approvals (3 pending)")
    assert window.timeline.run_id is None


def test_the_first_run_name_question_leaves_the_window_usable(services: Services, qtbot: Any) -> None:
    window = make_window(services, qtbot)
    window.ensure_operator_name()
    dialog = window._name_dialog
    qtbot.waitUntil(dialog.isVisible)
    assert not dialog.isModal() and QApplication.activeModalWidget() is None
    window.tabs.setCurrentIndex(2)  # the views answer while the question waits
    assert window.tabs.currentIndex() == 2
    dialog.setTextValue("alice")
    dialog.accept()
    assert services.actor == "alice"


def test_a_failed_store_call_stays_in_the_message_bar(services: Services, qtbot: Any) -> None:
    window = make_window(services, qtbot)

    def broken() -> None:
        raise OSError("disk I/O error")

    spawn(services.runner.run(broken), error_signal=services.runner.error)  # nobody handles it: the status bar
    qtbot.waitUntil(window.message_bar.isVisible)
    assert "disk I/O error" in window.message_bar.label.text()
