"""Notes and labels on one span, run or approval, for the detail panes, with "Add note / label…".

Notes are agent-safe plain text (`shown_block`: hidden characters as marks, never rich text); a note that
holds hidden characters gets the same kind of warning line approval arguments get, naming them. The panel
reads through the runner when its target changes and again when the marks cache says notes or labels moved.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from agentdesk.gui.notes.dialog import MarkDialog
from agentdesk.gui.shared.palette import status_colour
from agentdesk.model.notes.cache import MarksCache
from agentdesk.model.notes.writes import MarkRequest, apply
from agentdesk.model.plain import shown_block, shown_line
from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask, spawn
from agentdesk.store.errors import StoreError
from agentdesk.store.notes import commands, reads
from agentdesk.store.notes.marks import Marks, Note, Target, utc_text
from agentdesk.store.persistence.database import Store
from agentdesk.store.text.visible import findings, plural

MAX_SHOWN_CHARS = 200_000
"""The notes pane shows this much text; a longer note is cut with a line saying so (the CLI has it all)."""


def notes_text(marks: Marks) -> str:
    """Every note as plain text: a heading line (who, when, edited by) then its text, marks made visible."""
    blocks = []
    for note in marks.notes:
        edited = f" · edited by {note.updated_by} {utc_text(note.updated_at)}" if note.revision > 1 else ""
        body = note.text if len(note.text) <= MAX_SHOWN_CHARS else note.text[:MAX_SHOWN_CHARS] + "\n[cut here]"
        blocks.append(shown_line(f"{note.author} · {utc_text(note.created_at)}{edited}", 300) + "\n"
                      + shown_block(body))
    return "\n\n".join(blocks)


def hidden_warning(marks: Marks) -> str:
    """"⚠ A note holds 2 hidden characters: RIGHT-TO-LEFT OVERRIDE, ZERO WIDTH SPACE; they show as marks." """
    found = [f for note in marks.notes for f in findings(note.text)]
    if not found:
        return ""
    names = list(dict.fromkeys(f.name for f in found))
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return (f"⚠ A note holds {plural(len(found), 'hidden character')}: {', '.join(names[:3])}{more}; "
            "they show as marks.")


def _bound(action: Callable[[Note], None], note: Note) -> Callable[[], None]:
    """A slot taking nothing (a menu action's `checked` is dropped) that acts on one note."""
    return lambda: action(note)


class MarksPanel(QWidget):
    failed = Signal(str)
    """A write the store refused, as one sentence (the window shows it in its message bar)."""

    def __init__(self, services: Services, cache: MarksCache, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services, self.cache = services, cache
        self.target: Target | None = None
        self.marks = Marks()
        self._latest = LatestTask(services.runner)
        self.labels = QLabel(textFormat=Qt.TextFormat.PlainText, wordWrap=True)
        self.banner = QLabel(textFormat=Qt.TextFormat.PlainText, wordWrap=True)
        self.banner.setAutoFillBackground(True)
        self.banner.setContentsMargins(6, 4, 6, 4)
        self.banner.hide()
        self.notes = QPlainTextEdit(self)
        self.notes.setReadOnly(True)
        self.notes.setPlaceholderText("No notes.")
        self.notes.setMaximumHeight(self.fontMetrics().lineSpacing() * 8)
        self.notes.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.notes.customContextMenuRequested.connect(self._note_menu)
        self.notes.setToolTip("Right-click to edit or remove a note")
        self.add_button = QPushButton("Add note / label…", self)
        self.add_button.clicked.connect(self.open_dialog)
        self.add_button.setEnabled(False)
        if not cache.enabled:
            self.add_button.setToolTip("This source keeps no notes: they live in agentdesk's own store.")
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.labels, 1)
        row.addWidget(self.add_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 2, 0, 2)
        layout.addLayout(row)
        layout.addWidget(self.banner)
        layout.addWidget(self.notes)
        cache.changed.connect(self.reload)
        self.dialog: MarkDialog | None = None
        self.editor: QInputDialog | None = None
        self._show(Marks())

    def show_target(self, kind: str, target_id: str, run_id: str = "") -> None:
        """Follow a detail pane: its span or approval (an empty id hides the panel with the pane's content)."""
        self.target = Target(kind, target_id, run_id) if target_id else None
        self.setVisible(self.target is not None)
        self.add_button.setEnabled(self.target is not None and self.cache.enabled)
        self._show(Marks())
        self.reload()

    def reload(self) -> None:
        store, target = self.cache.store, self.target
        if store is None or target is None:
            self._latest.cancel()
            return
        self._latest.start(self._load(store, target))

    async def _load(self, store: Store, target: Target) -> None:
        self._show(await self.services.runner.run(reads.marks_for, store, target.kind, target.id))

    def _show(self, marks: Marks) -> None:
        self.marks = marks
        names = ", ".join(marks.label_names)
        self.labels.setText(shown_line(f"Labels: {names}" if names else "No labels.", 400))
        self.notes.setPlainText(notes_text(marks))
        self.notes.setVisible(bool(marks.notes))
        warning = hidden_warning(marks)
        self.banner.setText(warning)
        self.banner.setVisible(bool(warning))
        if warning:
            palette = self.banner.palette()
            light = palette.color(QPalette.ColorRole.Base).lightness() > 128
            failed = status_colour("failed")
            palette.setColor(QPalette.ColorRole.Window, failed.lighter(185) if light else failed.darker(250))
            palette.setColor(QPalette.ColorRole.WindowText, QColor("#5c0a0d") if light else QColor("#ffd7d7"))
            self.banner.setPalette(palette)

    def open_dialog(self) -> None:
        if self.target is None or not self.cache.enabled:
            return
        target = self.target
        if not target.run_id:  # a span or approval shown before its run was known: the store finds it
            store = self.cache.store
            assert store is not None
            spawn(self._resolve(store, target), on_error=lambda e: self.failed.emit(str(e)))
            return
        self._open_on(target)

    async def _resolve(self, store: Store, target: Target) -> None:
        self._open_on(await self.services.runner.run(reads.resolve, store, f"{target.kind}:{target.id}"))

    def _open_on(self, target: Target) -> None:
        self.target = target
        self.dialog = MarkDialog(target, self.marks.label_names, self)
        self.dialog.chosen.connect(self.write)
        self.dialog.open()

    def write(self, request: MarkRequest) -> None:
        store = self.cache.store
        if store is None or request.empty:
            return
        self._write(apply, store, request, self.services.actor)

    def _write(self, fn: Callable[..., object], *args: object) -> None:
        """A write on the runner; the panel reloads after it, or says why the store refused it."""
        spawn(self._written(fn, args), on_error=self._refused)

    async def _written(self, fn: Callable[..., object], args: tuple[object, ...]) -> None:
        await self.services.runner.run(fn, *args)
        self.reload()

    # -- editing and removing a note (compare-and-set on the revision shown) ------------------------------
    def note_menu(self) -> QMenu:
        menu = QMenu(self)
        for note in self.marks.notes[-10:]:
            who = shown_line(f"{note.author} · {utc_text(note.created_at)}", 80)
            edit = menu.addAction(f"Edit note by {who}…")
            edit.triggered.connect(_bound(self.edit_note, note))
            remove = menu.addAction(f"Remove note by {who}")
            remove.triggered.connect(_bound(self.remove_note, note))
        return menu

    def _note_menu(self, at: QPoint) -> None:
        if self.marks.notes and self.cache.enabled:
            self.note_menu().popup(self.notes.mapToGlobal(at))

    def edit_note(self, note: Note) -> None:
        """A multi-line editor on the note's text as stored; saved only if nobody changed it meanwhile."""
        editor = QInputDialog(self)
        editor.setWindowTitle("Edit note")
        editor.setLabelText(shown_line(f"Note by {note.author}, revision {note.revision}:", 200))
        editor.setOption(QInputDialog.InputDialogOption.UsePlainTextEditForTextInput)
        editor.setTextEchoMode(QLineEdit.EchoMode.Normal)
        editor.setTextValue(note.text)
        editor.textValueSelected.connect(lambda text: self._save_edit(note, text))
        self.editor = editor
        editor.open()

    def _save_edit(self, note: Note, text: str) -> None:
        store = self.cache.store
        if store is not None and text != note.text:
            self._write(commands.edit_note, store, note.id, text, note.revision, self.services.actor)

    def remove_note(self, note: Note) -> None:
        store = self.cache.store
        if store is not None:
            self._write(commands.remove_note, store, note.id, note.revision, self.services.actor)

    def _refused(self, exc: BaseException) -> None:
        self.failed.emit(str(exc) if isinstance(exc, StoreError) else f"The note could not be written: {exc}.")
        self.reload()
