"""F1 lists every shortcut, read from the window's own actions, shortcuts and key tables (it cannot drift);
the timeline consumes every key its table lists; Esc closes every secondary window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import QApplication, QWidget

from agentdesk.gui.ingest.dialog import ImportDialog
from agentdesk.gui.timeline.panel import TimelinePanel
from agentdesk.gui.window.main_window import MainWindow
from agentdesk.gui.window.shortcuts_help import ShortcutsDialog
from agentdesk.model.services import Services
from tests.gui.conftest import World


@pytest.fixture(autouse=True)
def own_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(tmp_path / "config"))


@pytest.fixture
def window(services: Services, qtbot: Any) -> MainWindow:
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.resize(1366, 768)
    window.show()
    return window


def native(sequence: QKeySequence) -> str:
    return sequence.toString(QKeySequence.SequenceFormat.NativeText)


def test_f1_lists_every_action_and_shortcut_of_the_window(window: MainWindow, qtbot: Any) -> None:
    window.show_shortcuts()
    dialog = window._shortcuts_dialog
    qtbot.waitUntil(dialog.isVisible)
    listed = {(keys, does) for _, keys, does in dialog.rows}
    keys_listed = " | ".join(keys for keys, _ in listed)
    actions = [a for a in window.findChildren(QAction) if not a.shortcut().isEmpty()]
    shortcuts = [s for s in window.findChildren(QShortcut) if not s.key().isEmpty()]
    assert actions and shortcuts
    for action in actions:
        assert native(action.shortcut()) in keys_listed, action.text()
    for shortcut in shortcuts:
        assert shortcut.whatsThis(), f"{native(shortcut.key())} has no description for F1"
        assert native(shortcut.key()) in keys_listed
    for keys in ("Ctrl+O", "Ctrl+I", "Ctrl+Q", "Ctrl+F", "P", "End", "F1", "A", "Ctrl+K"):
        assert any(keys in k.split(" ") or k.startswith(keys) for k, _ in listed), keys
    for row in range(dialog.table.rowCount()):  # "Does" is never cut: it wraps in a stretched column
        item = dialog.table.item(row, 2)
        assert item is not None
        rect = dialog.table.visualItemRect(item)
        assert rect.right() <= dialog.table.viewport().width()
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    assert not dialog.isVisible()


def test_the_timeline_handles_every_key_its_table_lists(services: Services, world: World, qtbot: Any) -> None:
    panel = TimelinePanel(services)
    qtbot.addWidget(panel)
    panel.show()
    panel.show_run(world.run_id)
    qtbot.waitUntil(lambda: panel.data is not None)
    panel.select_span(world.model_span_id)
    presses = {"F": [(Qt.Key.Key_F, Qt.KeyboardModifier.NoModifier)],
               "End": [(Qt.Key.Key_End, Qt.KeyboardModifier.NoModifier)],
               "+ or = / -": [(Qt.Key.Key_Plus, Qt.KeyboardModifier.NoModifier),
                              (Qt.Key.Key_Equal, Qt.KeyboardModifier.NoModifier),
                              (Qt.Key.Key_Minus, Qt.KeyboardModifier.NoModifier)],
               "P": [(Qt.Key.Key_P, Qt.KeyboardModifier.NoModifier)],
               "Ctrl+F": [(Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)],
               "F3 / Shift+F3": [(Qt.Key.Key_F3, Qt.KeyboardModifier.NoModifier),
                                 (Qt.Key.Key_F3, Qt.KeyboardModifier.ShiftModifier)],
               "Left / Right": [(Qt.Key.Key_Left, Qt.KeyboardModifier.NoModifier),
                                (Qt.Key.Key_Right, Qt.KeyboardModifier.NoModifier)],
               "* / /": [(Qt.Key.Key_Asterisk, Qt.KeyboardModifier.NoModifier),
                         (Qt.Key.Key_Slash, Qt.KeyboardModifier.NoModifier)]}
    assert {keys for _, keys, _ in panel.key_help} == set(presses)
    for keys, events in presses.items():
        for key, mods in events:
            event = QKeyEvent(QEvent.Type.KeyPress, key, mods)
            assert panel.eventFilter(panel.plot, event), f"{keys}: {key} is listed in F1 but not handled"


def test_esc_closes_every_secondary_window(window: MainWindow, world: World, qtbot: Any, tmp_path: Path) -> None:
    window.timeline.show_run(world.run_id)
    qtbot.waitUntil(lambda: window.timeline.data is not None)
    window.compare_runs(world.run_id)
    diff = window._diff_window
    qtbot.waitUntil(diff.isVisible)
    assert diff.width() <= 1366 and diff.height() <= 768  # a 1366 x 768 screen shows it whole
    diff.activateWindow()
    diff.run_b_edit.setFocus()
    qtbot.keyClick(diff.run_b_edit, Qt.Key.Key_Escape)
    assert not diff.isVisible()

    window.search_all_runs()
    search = window._search_dialog
    qtbot.waitUntil(search.isVisible)
    qtbot.keyClick(search, Qt.Key.Key_Escape)
    assert not search.isVisible()

    dialog = ShortcutsDialog(window)
    dialog.open()
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    assert not dialog.isVisible()

    importing = ImportDialog(window.services, [tmp_path / "missing.json"], window)
    importing.open()
    with qtbot.waitSignal(importing.finished_import, timeout=5000):
        importing.start()
    qtbot.keyClick(importing, Qt.Key.Key_Escape)
    assert not importing.isVisible()
    assert not [w for w in QApplication.topLevelWidgets()
                if isinstance(w, QWidget) and w.isVisible() and w is not window]
