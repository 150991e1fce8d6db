"""The window's receiver switch: off by default, the port from settings, counters in the status bar."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

from agentdesk.gui.window.main_window import MainWindow
from agentdesk.gui.window.receiver_toggle import PORT_KEY
from agentdesk.model.services import Services
from agentdesk.store.native import NativeSource
from tests.conftest import prebuilt
from tests.gui.conftest import World, build_world
from tests.store.server.conftest import Answer, document, post, span_json


@pytest.fixture(autouse=True)
def own_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_CONFIG_DIR", str(tmp_path / "config"))


@pytest.fixture(autouse=True)
def running_loop(qapp: Any) -> Iterator[asyncio.AbstractEventLoop]:
    """The window's qasync loop, running as under the app's `asyncio.run(..., loop_factory=QEventLoop)`:
    the receiver's aiohttp server asks for the running loop. qtbot's event processing drives it."""
    import qasync

    loop = qasync.QEventLoop(qapp, already_running=True)
    asyncio.set_event_loop(loop)
    yield loop
    for task in asyncio.all_tasks(loop):
        if not task.done():
            task.get_coro().close()
    # Not `loop.stop()`: that calls QApplication.exit(), which would end every later qtbot wait at once.
    loop._QEventLoop__is_running = False
    qapp.aboutToQuit.disconnect(loop._after_run_forever)
    loop._after_run_forever()
    asyncio.events._set_running_loop(None)
    asyncio.set_event_loop(None)
    loop.close()


@pytest.fixture
def world(tmp_path: Path) -> World:
    return build_world(prebuilt(tmp_path / "store.sqlite"))


def open_services(path: Path, *, read_only: bool = False) -> Services:
    source = NativeSource.open(str(path), read_only=read_only, create=not read_only)
    source.watch(poll_interval_s=0.02)
    return Services.create(source, actor="tester", coalesce_ms=10)


@pytest.fixture
def services(world: World, qtbot: Any) -> Iterator[Services]:
    services = open_services(world.path)
    yield services
    services.close()
    services.source.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post_aside(url: str, body: bytes) -> list[Answer]:
    """POST from another thread: the receiver answers on the window's loop, which qtbot's waits drive."""
    answers: list[Answer] = []
    threading.Thread(target=lambda: answers.append(post(url, body)), daemon=True).start()
    return answers


def make_window(services: Services, qtbot: Any) -> MainWindow:
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    return window


def test_off_by_default_then_on_at_the_configured_port(services: Services, qtbot: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from agentdesk.store.server.receiver import Receiver

    served: list[tuple[threading.Thread, asyncio.AbstractEventLoop]] = []
    traces = Receiver._traces

    async def noted(self: Receiver, request: Any) -> Any:
        served.append((threading.current_thread(), asyncio.get_running_loop()))
        return await traces(self, request)

    monkeypatch.setattr(Receiver, "_traces", noted)
    window = make_window(services, qtbot)
    toggle = window.receiver
    assert not toggle.is_on and not toggle.button.isChecked() and toggle.button.text() == "○ OTLP off"
    port = free_port()
    window.settings.setValue(PORT_KEY, port)
    toggle.button.click()
    qtbot.waitUntil(lambda: toggle.is_on, timeout=5000)
    assert toggle.action.isChecked() and toggle.button.text() == f"● OTLP :{port}"
    receiver = toggle.receiver
    assert receiver is not None and receiver.loop is not None
    body = json.dumps(document(span_json("12" * 16, "34" * 8, name="invoke_agent live"), service="live-agent"))
    answers = post_aside(f"http://127.0.0.1:{port}/v1/traces", body.encode())
    qtbot.waitUntil(lambda: bool(answers), timeout=10000)
    assert answers[0].status == 200
    # One async style: the handler ran on the GUI thread, on the window's qasync loop; no loop thread of its own.
    assert served == [(threading.main_thread(), receiver.loop)]
    assert type(receiver.loop).__module__.startswith("qasync")
    assert not [t for t in threading.enumerate() if t.name == "agentdesk-otlp-receiver"]
    toggle.refresh()
    assert toggle.label.text() == "1 spans · 1 requests · 0 refused"
    model = window.tree.model  # the tree hears of the new project through the bus, live
    qtbot.waitUntil(lambda: any(model.index(r, 0).data() == "live-agent" for r in range(model.rowCount())),
                    timeout=3000)
    toggle.action.trigger()  # the menu item switches it off too
    qtbot.waitUntil(lambda: not toggle.is_on and toggle.button.isEnabled(), timeout=10000)
    assert toggle.button.text() == "○ OTLP off" and toggle.label.text() == ""
    with socket.socket() as s:  # the port was released
        s.bind(("127.0.0.1", port))


def test_a_taken_port_says_so_and_stays_off(services: Services, qtbot: Any) -> None:
    window = make_window(services, qtbot)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        window.settings.setValue(PORT_KEY, taken.getsockname()[1])
        window.receiver.button.click()
        qtbot.waitUntil(lambda: "Cannot listen" in window.status.currentMessage(), timeout=5000)
    assert not window.receiver.is_on and not window.receiver.button.isChecked()


def test_a_read_only_store_cannot_receive(world: World, qtbot: Any) -> None:
    services = open_services(world.path, read_only=True)
    try:
        window = make_window(services, qtbot)
        assert not window.receiver.button.isEnabled()
        assert "read-only" in window.receiver.button.toolTip()
    finally:
        services.close()
        services.source.close()


def test_the_windows_receiver_serves_the_agent_api(services: Services, qtbot: Any) -> None:
    import threading

    from agentdesk.client import AgentDesk
    from agentdesk.store.agents import tokens
    from agentdesk.store.approvals import commands as approval_commands

    store = services.source.store
    token = tokens.create(store, "window-bot", "tester")[1]
    window = make_window(services, qtbot)
    port = free_port()
    window.settings.setValue(PORT_KEY, port)
    window.receiver.button.click()
    qtbot.waitUntil(lambda: window.receiver.is_on, timeout=5000)
    results: list[str] = []

    def agent() -> None:
        try:
            desk = AgentDesk.connect(f"http://127.0.0.1:{port}", token=token)
            with desk, desk.register(project="p", agent="a").run("r") as run:
                results.append(run.request_approval("deploy", {"env": "prod"}).outcome.value)
        except Exception as exc:  # said in the assertion below rather than lost in a thread
            results.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=agent, daemon=True)
    thread.start()
    def asked() -> list[str]:
        return [a.id for a in services.source.approvals("pending") if a.tool_name == "deploy"]

    qtbot.waitUntil(lambda: bool(asked()) or bool(results), timeout=10000)
    assert results == []
    approval_commands.decide(store, asked()[0], True, "tester")  # what the window's Approve does
    qtbot.waitUntil(lambda: results == ["approved"], timeout=10000)
    # The agent's run ends through the receiver, which answers on this (the GUI) thread's loop: wait with the
    # loop turning. A plain thread.join() blocked that loop and waited out its timeout, with the run unended.
    qtbot.waitUntil(lambda: not thread.is_alive(), timeout=10000)
    window.receiver.action.trigger()
    qtbot.waitUntil(lambda: not window.receiver.is_on and window.receiver.button.isEnabled(), timeout=10000)
