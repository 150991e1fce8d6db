"""The window's OTLP receiver switch: off by default, its port in settings, counters in the status bar.

The receiver's coroutines run on the window's own qasync loop (one async style,
no second loop on a thread): aiohttp's handlers only read bodies and await
futures. What would block is elsewhere: decoding in the receiver's helper process,
the spool's appends and fsyncs on its group-commit thread, store writes on its
writer thread, so the GUI thread never waits on the database or the disk. The
window only polls the counters once a second and shows them as plain text.
Only loopback is offered here; a remote address with a token is the CLI's
`agentdesk receive --allow-remote --token`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QHBoxLayout, QInputDialog, QLabel, QToolButton, QWidget

from agentdesk.model.services import Services
from agentdesk.model.tasks import spawn
from agentdesk.model.tree.rows import escaped_tooltip
from agentdesk.store.ingest.receiver_stats import ReceiverCounters
from agentdesk.store.native import NativeSource

if TYPE_CHECKING:
    from agentdesk.store.server.receiver import Receiver

DEFAULT_PORT = 4318
PORT_KEY = "receiver/port"


class ReceiverToggle(QWidget):
    """A checkable button plus a counters label; `action` is the same switch for a menu."""

    def __init__(self, services: Services, settings: QSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._settings = settings
        self._receiver: Receiver | None = None
        self._busy = False
        self.button = QToolButton(self)
        self.button.setCheckable(True)
        self.button.setAutoRaise(True)
        self.label = QLabel(self)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.button)
        layout.addWidget(self.label)
        self.action = QAction("Receive OpenTelemetry traces (OTLP/HTTP)", self)
        self.action.setCheckable(True)
        self.port_action = QAction("Receiver port…", self)
        self.port_action.triggered.connect(self.ask_port)
        self.button.toggled.connect(self.set_on)
        self.action.toggled.connect(self.set_on)
        self._timer = QTimer(self)
        self._timer.setInterval(1000)
        self._timer.timeout.connect(self.refresh)
        self._why_not = self._unavailable_reason()
        self._show_state()

    # -- settings --------------------------------------------------------------------------
    @property
    def port(self) -> int:
        value = self._settings.value(PORT_KEY, DEFAULT_PORT)  # INI files give strings back
        try:
            port = int(value) if isinstance(value, int | str) else DEFAULT_PORT
        except ValueError:
            return DEFAULT_PORT
        return port if 0 < port < 65536 else DEFAULT_PORT

    def ask_port(self) -> None:
        dialog = QInputDialog(self)
        dialog.setWindowTitle("Receiver port")
        dialog.setLabelText("Port for the OTLP/HTTP receiver on 127.0.0.1 (takes effect when it next starts):")
        dialog.setInputMode(QInputDialog.InputMode.IntInput)
        dialog.setIntRange(1, 65535)
        dialog.setIntValue(self.port)
        dialog.intValueSelected.connect(lambda port: self._settings.setValue(PORT_KEY, port))
        dialog.open()

    def _unavailable_reason(self) -> str:
        source = self._services.source
        if not isinstance(source, NativeSource):
            return "The receiver writes into agentdesk stores only; this is another runtime's database."
        if source.store.read_only:
            return "The store is open read-only."
        return ""

    # -- switching -------------------------------------------------------------------------
    @property
    def is_on(self) -> bool:
        return self._receiver is not None

    def set_on(self, on: bool) -> None:
        if self._busy or on == self.is_on:
            self._show_state()
            return
        if on and self._why_not:
            self._message(self._why_not)
            self._show_state()
            return
        self._busy = True
        if on:
            spawn(self._switch_on(), error_signal=self._services.runner.error)
        else:
            receiver, self._receiver = self._receiver, None
            self._timer.stop()
            assert receiver is not None
            spawn(self._switch_off(receiver), error_signal=self._services.runner.error)
        self._show_state()

    async def _switch_on(self) -> None:
        """On the window's loop: the spool's folder work runs on a worker thread, binding does not block."""
        from agentdesk.store.server.receiver import Receiver, ReceiverConfig  # aiohttp only when used

        source = self._services.source
        assert isinstance(source, NativeSource)
        try:
            receiver = Receiver(source.store, ReceiverConfig(port=self.port))
            await receiver.start()
        except Exception as exc:
            self._failed(exc)
            return
        self._started(receiver)

    async def _switch_off(self, receiver: Receiver) -> None:
        """Requests in flight get their answers; the writer's drain waits on a worker thread."""
        try:
            await receiver.stop()
        except Exception as exc:
            self._failed(exc)
            return
        self._stopped(None)

    @property
    def receiver(self) -> Receiver | None:
        return self._receiver

    def _started(self, receiver: Receiver) -> None:
        self._busy = False
        self._receiver = receiver
        self._timer.start()
        self.refresh()
        self._message(f"Receiving OTLP/HTTP on http://127.0.0.1:{self.port}/v1/traces.")

    def _stopped(self, _: object) -> None:
        self._busy = False
        self._show_state()
        self._message("The OTLP receiver stopped.")

    def _failed(self, error: BaseException) -> None:
        self._busy = False
        self._show_state()
        self._message(str(error))

    def shutdown(self) -> None:
        """Window closing: store what was acknowledged (bounded; what is left stays in the spool for the
        next start), then stop listening on the loop while it still runs."""
        self._timer.stop()
        receiver, self._receiver = self._receiver, None
        if receiver is not None:
            receiver.stop_writing(timeout_s=10.0)
            if receiver.loop is not None and receiver.loop.is_running():
                spawn(receiver.stop(), error_signal=self._services.runner.error)

    # -- showing ---------------------------------------------------------------------------
    def counters(self) -> ReceiverCounters | None:
        receiver = self._receiver
        return receiver.stats.snapshot() if receiver is not None else None

    def refresh(self) -> None:
        self._show_state()

    def _show_state(self) -> None:
        on = self.is_on
        for switch in (self.button, self.action):
            blocked = switch.blockSignals(True)
            switch.setChecked(on)
            switch.blockSignals(blocked)
        self.button.setEnabled(not self._busy and not (self._why_not and not on))
        self.action.setEnabled(self.button.isEnabled())
        self.button.setToolTip(self._why_not or ("Stop receiving OTLP traces" if on else
                                                 f"Receive OTLP traces on 127.0.0.1:{self.port}"))
        if self._busy:
            self.button.setText("OTLP …")
            return
        c = self.counters()
        if c is None:
            self.button.setText("○ OTLP off")
            self.label.setText("")
            self.label.setStyleSheet("")
            return
        self.button.setText(f"● OTLP :{self.port}")
        self.label.setText(f"{c.spans:,} spans · {c.requests:,} requests · {c.refused_requests:,} refused")
        problem = f"last problem: {c.last_problem[:300]}" if c.last_problem else ""
        self.label.setToolTip(escaped_tooltip(c.summary(), problem))  # the problem may quote agent text
        trouble = c.refused_requests or c.rejected_requests or c.failed_requests
        self.label.setStyleSheet("color: #d08000;" if trouble else "color: #30a46c;")

    def _message(self, text: str) -> None:
        window = self.window()
        bar = getattr(window, "statusBar", None)
        if callable(bar):
            bar().showMessage(text, 8000)

