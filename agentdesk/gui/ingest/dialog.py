"""File → Import…: OTLP files into the store off the GUI thread, with progress and Cancel.

The import (`store.otel.importer.import_files`) runs on the store runner's pool;
its progress callbacks arrive from that thread and cross to the GUI thread as a
queued signal. Cancel sets the importer's event: it stops at the next record or
between transactions, so only whole traces are left in the store. Everything
shown is plain text (file names and error sentences come from outside).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QLabel,
    QProgressBar,
    QVBoxLayout,
    QWidget,
)

from agentdesk.model.services import Services
from agentdesk.model.tasks import spawn
from agentdesk.model.text import plural
from agentdesk.store.ingest.importer import ImportProgress, ImportResult, import_files
from agentdesk.store.ingest.spans import NotOtlp
from agentdesk.store.native import NativeSource

FILE_FILTER = "OpenTelemetry traces (*.json *.jsonl *.ndjson *.pb *.bin *.otlp *.gz);;All files (*)"


class _Relay(QObject):
    """Carries progress from the import thread to the GUI thread (queued: the receiver lives here)."""

    progressed = Signal(object)


def why_not_import(services: Services) -> str | None:
    source = services.source
    if not isinstance(source, NativeSource):
        return "Importing writes to an agentdesk store; this window shows another runtime's database."
    if source.descriptor.read_only:
        return "The store is open read-only."
    return None


def choose_files(parent: QWidget) -> list[Path]:
    names, _ = QFileDialog.getOpenFileNames(parent, "Import OpenTelemetry traces", "", FILE_FILTER)
    return [Path(n) for n in names]


class ImportDialog(QDialog):
    """Shows one import from start to end; Cancel while it runs, Close after."""

    finished_import = Signal(object)
    """The `ImportResult` (or the exception) once the import has ended."""
    failed = Signal(str)
    """The import stopped on an error: one sentence naming the files, for the window's message bar."""

    def __init__(self, services: Services, paths: list[Path], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services, self.paths = services, paths
        self.setWindowTitle("Import OpenTelemetry traces")
        self.setMinimumWidth(520)
        self.cancel_event = threading.Event()
        self.outcome: ImportResult | None = None
        self._began = time.monotonic()
        self._write_began: float | None = None
        self.files = self._label(", ".join(p.name for p in paths) if len(paths) < 4
                                 else f"{paths[0].name} and {len(paths) - 1} more files")
        self.phase = self._label("Starting…")
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 1000)
        self.detail = self._label("")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.buttons.rejected.connect(self._cancel)
        layout = QVBoxLayout(self)
        for widget in (self.files, self.phase, self.bar, self.detail, self.buttons):
            layout.addWidget(widget)
        self._relay = _Relay(self)
        self._relay.progressed.connect(self._show_progress, Qt.ConnectionType.QueuedConnection)

    def _label(self, text: str) -> QLabel:
        label = QLabel(text, self)
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setWordWrap(True)
        return label

    def start(self) -> None:
        source = self.services.source
        assert isinstance(source, NativeSource)
        job = partial(import_files, source.store, self.paths, progress=self._relay.progressed.emit,
                      cancel=self.cancel_event, actor=self.services.actor)
        spawn(self._import(job), error_signal=self.services.runner.error)

    async def _import(self, job: Callable[[], ImportResult]) -> None:
        try:
            result = await self.services.runner.run(job)
        except Exception as exc:
            self._failed(exc)
            return
        self._done(result)

    # -- progress -------------------------------------------------------------------------
    def _show_progress(self, p: ImportProgress) -> None:
        if p.phase == "reading":
            self.phase.setText("Reading and checking the files…")
            if p.bytes_total:
                self.bar.setValue(int(1000 * p.bytes_read / p.bytes_total))
            self.detail.setText(f"{p.bytes_read / 2**20:,.1f} of {p.bytes_total / 2**20:,.1f} MiB · "
                                f"{p.spans_read:,} spans")
            return
        now = time.monotonic()
        if self._write_began is None:
            self._write_began = now
        self.phase.setText("Writing whole traces into the store…")
        self.bar.setValue(int(1000 * p.spans_done / max(1, p.spans_total)))
        rate = p.spans_done / max(1e-6, now - self._write_began) if now > self._write_began else 0.0
        left = (p.spans_total - p.spans_done) / rate if rate > 0 else None
        eta = f" · about {left:,.0f} s left" if left is not None else ""
        self.detail.setText(f"{p.spans_done:,} of {p.spans_total:,} spans · {p.traces_done:,} of "
                            f"{p.traces_total:,} traces · {rate:,.0f} spans/s{eta}")

    def reject(self) -> None:
        """Esc, the title bar's close: Cancel while the import runs (only whole traces are kept), Close after."""
        self._cancel()

    def _cancel(self) -> None:
        if self.outcome is not None or self.buttons.standardButtons() & QDialogButtonBox.StandardButton.Close:
            self.accept()
            return
        self.cancel_event.set()
        self.phase.setText("Cancelling: stopping after the current trace, so only whole traces are kept…")
        self.buttons.setEnabled(False)

    # -- the end --------------------------------------------------------------------------
    def _done(self, result: ImportResult) -> None:
        self.outcome = result
        r = result.report
        if isinstance(result.error, NotOtlp):  # the same sentence as `agentdesk import`
            self.phase.setText(f"{result.error}.")
        elif result.error is not None:
            self.phase.setText(f"Stopped at a bad record: {result.error}.")
            self.failed.emit(f"The import of {self._named()} stopped at a bad record: {result.error}.")
        elif result.cancelled:
            self.phase.setText("Cancelled. Only whole traces were kept.")
        elif result.skipped and not (r.spans_written or r.duplicates or r.orphans_pending):
            self.phase.setText(f"Nothing was imported: {result.skipped.describe()}.")
            self.failed.emit(f"Nothing was imported from {self._named()}: {result.skipped.describe()}.")
        else:
            self.phase.setText("Import finished.")
        self.bar.setValue(1000)
        cut = (f" · {result.strings_cut:,} string{'s' if result.strings_cut != 1 else ''} over "
               f"{result.limits.max_string_chars:,} characters kept cut" if result.strings_cut else "")
        skipped = f" · {result.skipped.describe()}" if result.skipped else ""
        self.detail.setText(f"{plural(r.spans_written, 'span')} in {plural(r.traces, 'trace')} written, "
                            f"{r.duplicates:,} already there, {r.orphans_pending:,} waiting for a parent · "
                            f"{result.seconds:,.1f} s{cut}{skipped}")
        self._closeable()
        self.finished_import.emit(result)

    def _failed(self, exc: BaseException) -> None:
        self.phase.setText(f"The import failed: {exc}")
        self.failed.emit(f"The import of {self._named()} failed: {exc}")
        self._closeable()
        self.finished_import.emit(exc)

    def _named(self) -> str:
        names = [str(p) for p in self.paths]
        if len(names) == 1:
            return names[0]
        return f"{len(names)} files ({', '.join(names[:3])}{', …' if len(names) > 3 else ''})"

    def _closeable(self) -> None:
        self.buttons.setStandardButtons(QDialogButtonBox.StandardButton.Close)
        self.buttons.setEnabled(True)
        self.buttons.rejected.disconnect()
        self.buttons.rejected.connect(self.accept)
        self.buttons.accepted.connect(self.accept)


def import_into_window(services: Services, parent: QWidget) -> ImportDialog | None:
    """File → Import…: pick files, then show the dialog while they import."""
    paths = choose_files(parent)
    if not paths:
        return None
    dialog = ImportDialog(services, paths, parent)
    dialog.open()
    dialog.start()
    return dialog
