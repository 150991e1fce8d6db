"""Starting the window: open the store, start watching it, run Qt under qasync.

`run_gui` is what `agentdesk gui` and `agentdesk demo` call. With `screenshot`
it renders offscreen, saves a PNG and returns instead of entering the loop.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
from typing import Protocol

from store.errors import StoreError
from store.native import NativeSource


class Stoppable(Protocol):
    def stop(self) -> None: ...


def entity_of(entity_id: str) -> str:
    """Our ids carry their type as a prefix (run_…, apr_…); the tree needs the entity name."""
    prefixes = {"prj": "project", "tsk": "task", "ses": "session", "agt": "agent", "run": "run",
                "spn": "span", "apr": "approval"}
    return prefixes.get(entity_id.split("_", 1)[0], "run")


def run_gui(location: str, *, screenshot: str | None = None, view: str = "window", select: str | None = None,
            simulator: Stoppable | None = None, allow_writes: bool = False, theme: str = "system") -> int:
    if screenshot and not os.environ.get("QT_QPA_PLATFORM") and not os.environ.get("DISPLAY"):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    try:
        source = NativeSource.open(location, create=False)
    except StoreError as exc:
        print(f"agentdesk: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        return _run(source, screenshot, view, select, simulator, theme)
    finally:
        if simulator is not None:
            simulator.stop()
        source.close()


def _run(source: NativeSource, screenshot: str | None, view: str, select: str | None,
         simulator: Stoppable | None, theme: str) -> int:
    import qasync
    from PySide6.QtWidgets import QApplication

    from model.services import Services

    from .main_window import MainWindow
    from .screenshot import capture, settle
    from .theme import apply_theme

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setApplicationName("agentdesk")
    apply_theme(app, theme if screenshot or theme != "system" else "system")
    source.watch()
    services = Services.create(source, actor=getpass.getuser() or "operator")
    window = MainWindow(services)
    try:
        if screenshot:
            window.resize(1600, 960)
            window.show()
            target = select or source.showcase_run()
            if target:
                window.select(entity_of(target), target)
            settle(window)
            capture(window, view, screenshot)
            print(screenshot)
            return 0
        window.show()
        window.restore_state()
        if select:
            window.select(entity_of(select), select)
        window.ensure_operator_name()
        loop = qasync.QEventLoop(app)
        asyncio.set_event_loop(loop)
        closing = asyncio.Event()
        app.aboutToQuit.connect(closing.set)
        with loop:
            loop.run_until_complete(closing.wait())
        return 0
    finally:
        window.close()
        services.close()
