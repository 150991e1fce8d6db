"""Starting the window: open the store, start watching it, run Qt under qasync.

`run_gui` is what `agentdesk gui` and `agentdesk demo` call. With `screenshot`
it renders offscreen, saves a PNG and returns instead of entering the loop.
"""

from __future__ import annotations

import asyncio
import gc
import getpass
import os
import sys
from typing import TYPE_CHECKING, Protocol

from agentdesk.store.errors import StoreError
from agentdesk.store.ingest.spans import split_span_row_id
from agentdesk.store.persistence import sqlite
from agentdesk.store.persistence.bus import EntityKind
from agentdesk.store.persistence.database import to_url
from agentdesk.store.source import Source
from agentdesk.store.sources import open_source

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication, QWidget


class Stoppable(Protocol):
    def stop(self) -> None: ...


EXIT_VIEW_FAILED = 5
"""`gui --screenshot --view timeline` whose run could not be loaded: the store's failure, as the CLI's 5 (README)."""
ENTITY_PREFIXES = {"prj": "project", "tsk": "task", "ses": "session", "agt": "agent", "run": "run",
                   "spn": "span", "apr": "approval", "ask": "ask",
                   "otp": "project", "ott": "task", "ots": "session", "ota": "agent", "otr": "run"}
"""Our id prefixes, including those of rows imported from OpenTelemetry (store/ingest/writer.py)."""


def resolve_entity(source: Source, entity_id: str) -> str:
    """Which kind of thing `--select ID` names: our ids carry a prefix; foreign ids are looked up.

    Runs once at start-up, before the window exists.
    """
    if source.descriptor.kind == "agentdesk":
        if split_span_row_id(entity_id) is not None:
            return "span"
        return ENTITY_PREFIXES.get(entity_id.split("_", 1)[0], "run")
    for entity in (EntityKind.RUN, EntityKind.SPAN, EntityKind.APPROVAL, EntityKind.AGENT, EntityKind.SESSION,
                   EntityKind.TASK, EntityKind.PROJECT):
        try:
            source.locate(entity, entity_id)
        except StoreError:
            continue
        return entity
    return "run"


def run_gui(location: str, *, screenshot: str | None = None, view: str = "window", select: str | None = None,
            simulator: Stoppable | None = None, allow_writes: bool = False, theme: str = "system",
            size: tuple[int, int] = (1920, 1080)) -> int:
    if screenshot and not os.environ.get("QT_QPA_PLATFORM") and not os.environ.get("DISPLAY"):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setApplicationName("agentdesk")
    app.setDesktopFileName("agentdesk")  # matches packaging/agentdesk.desktop, for the taskbar icon
    try:
        source = _open(location, allow_writes=allow_writes, ask=screenshot is None)
    except StoreError as exc:
        print(f"agentdesk: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        return _run(app, source, screenshot, view, select, theme, follow=simulator is not None, size=size)
    finally:
        if simulator is not None:
            simulator.stop()
        source.close()


def _open(location: str, *, allow_writes: bool, ask: bool) -> Source:
    """Other runtimes' databases open read-only unless writes were asked for *and* confirmed here."""
    from agentdesk.gui.window.write_consent import ask_for_writes, writes_confirmed

    source = open_source(location, read_only=cannot_write(location))
    descriptor = source.descriptor
    if descriptor.kind == "agentdesk" or not allow_writes:
        return source
    if writes_confirmed(descriptor) or (ask and ask_for_writes(descriptor)):
        source.close()
        return open_source(location, allow_writes=True)
    return source


def cannot_write(location: str) -> bool:
    """An existing store file this process cannot write (a read-only mount, a file or folder without write
    permission) opens read-only, as the command line reads it, instead of failing to open at all."""
    path = sqlite.path_of(to_url(location))
    if path is None or not path.is_file():
        return False
    return not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


def _quit_on_signals(app: QApplication) -> None:
    """Ctrl-C and SIGTERM close the window as File → Quit does, so `agentdesk demo` still removes its store.

    Python runs signal handlers only when it gets control; the timer hands it control a few times a second
    while Qt waits for events (the app owns it).
    """
    import signal

    from PySide6.QtCore import QTimer

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda _signum, _frame: app.closeAllWindows() or app.quit())
    timer = QTimer(app)
    timer.timeout.connect(lambda: None)
    timer.start(250)


def _quit_after_first_paint(app: QApplication, window: QWidget) -> None:
    from PySide6.QtCore import QEvent, QObject

    class FirstPaint(QObject):
        def eventFilter(self, watched: QObject, event: QEvent) -> bool:
            if event.type() == QEvent.Type.Paint:
                print("first paint", flush=True)
                app.quit()
                window.removeEventFilter(self)
            return False

    window.installEventFilter(FirstPaint(window))


def _run(app: QApplication, source: Source, screenshot: str | None, view: str, select: str | None,
         theme: str, *, follow: bool = False, size: tuple[int, int] = (1920, 1080)) -> int:
    import qasync
    from pyqtgraph.util.garbage_collector import GarbageCollector

    from agentdesk.gui.shared.theme import apply_theme
    from agentdesk.gui.window.main_window import MainWindow
    from agentdesk.gui.window.screenshot import ScreenshotError, ViewFailed, capture, settle
    from agentdesk.model.services import Services

    apply_theme(app, theme if screenshot or theme != "system" else "system")
    # The qasync loop first: the window's models start their store reads (coroutines on this loop) as they
    # are built, and every one of them must land on the loop that runs below.
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    source.watch()
    services = Services.create(source, actor=getpass.getuser() or "operator")
    window = MainWindow(services)
    window.follow_first_approval = follow  # the demo: jump to the first approval its agents ask for
    # Everything built so far lives as long as the window: keep it out of the collector's full
    # passes, which otherwise stall the GUI thread ~100 ms at a time while a big run loads.
    gc.freeze()
    # The cyclic collector runs in whichever thread allocates, and a store runner's thread must never free a
    # widget (Qt objects die on the thread that owns them, or the process crashes): collect on the GUI thread,
    # on a timer, as pyqtgraph advises.
    collector = GarbageCollector(interval=1.0)
    try:
        if screenshot:
            window.resize(*size)
            window.show()
            if select:
                window.select(resolve_entity(source, select), select)
            elif showcase := source.showcase_run():
                window.select("run", showcase)
            settle(window)
            try:
                capture(window, view, screenshot)
            except ScreenshotError as exc:
                print(f"agentdesk: {exc}", file=sys.stderr)
                return EXIT_VIEW_FAILED if isinstance(exc, ViewFailed) else 2
            print(screenshot)
            return 0
        if os.environ.get("AGENTDESK_QUIT_AFTER_FIRST_PAINT"):
            _quit_after_first_paint(app, window)  # bench/startup.py: time to the first painted window
        window.show()
        window.restore_state(restore_selection=not select)
        if select:
            window.select(resolve_entity(source, select), select)
        window.ensure_operator_name()
        _quit_on_signals(app)
        closing = asyncio.Event()
        app.aboutToQuit.connect(closing.set)
        with loop:
            loop.run_until_complete(closing.wait())
        return 0
    finally:
        collector.timer.stop()
        gc.enable()
        window.close()
        services.close()
        if not loop.is_closed():  # the screenshot path never ran it; closed now, while its Qt objects live
            loop.close()
