"""The rule editor form: effect, tool, what it matches, where it applies, expiry and a note.

It only turns widgets into a `RuleForm` and back; the panel runs dry runs and
saves. Everything an operator types here is the operator's own text; agent text
that reaches the form (a proposal from an approval) is shown through `visible`
in the read-only hint, never interpreted.
"""

from __future__ import annotations

from datetime import datetime

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QWidget,
)

from agentdesk.model.approval_format import local_time, utc_now
from agentdesk.model.rules.draft import EXPIRY_CHOICES, KINDS, RuleForm, expiry_after
from agentdesk.store.rules.model import every_call_warning

KIND_LABELS = {"shell": "shell commands", "fields": "argument values", "any": "any arguments"}
COMMANDS_HINT = ("One command per line, e.g.  npm test   or   git status *\n"
                 "Every command a call runs (after &&, ;, |, inside $(…), …) must be one of these; "
                 "a final * allows any further arguments.")
FIELDS_HINT = '{"cwd": {"under": "/work"}, "timeout_s": {"any": true}}'


class RuleEditor(QWidget):
    edited = Signal()
    """Any field changed (the panel re-runs the dry run, debounced)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._kept_expiry: datetime | None = None
        self._editing: RuleForm = RuleForm()
        self.heading = QLabel("New rule", self)
        self.effect = QComboBox(self)
        self.effect.addItems(["allow", "deny", "ask"])
        self.tool = QLineEdit(self)
        self.tool.setPlaceholderText("tool name, e.g. run_shell (* for every tool)")
        self.kind = QComboBox(self)
        for kind in KINDS:
            self.kind.addItem(KIND_LABELS[kind], kind)
        self.commands = QPlainTextEdit(self)
        self.commands.setPlaceholderText(COMMANDS_HINT)
        self.commands.setTabChangesFocus(True)
        self.commands.setFixedHeight(72)
        self.command_field = QLineEdit("command", self)
        self.command_field.setToolTip("The argument that holds the command (command, cmd, script…)")
        self.command_field.setMaximumWidth(110)
        self.fields = QLineEdit(self)
        self.fields.setPlaceholderText(FIELDS_HINT)
        self.fields.setToolTip("Conditions on the other arguments, as JSON: equals, one_of, under (a directory) "
                               "or any. An allow rule matches only calls whose every argument is named.")
        self.project = QLineEdit(self)
        self.agent = QLineEdit(self)
        self.session = QLineEdit(self)
        for edit, what in ((self.project, "project"), (self.agent, "agent"), (self.session, "session")):
            edit.setPlaceholderText(f"any {what}")
        self.expiry = QComboBox(self)
        self.enabled = QCheckBox("enabled", self)
        self.enabled.setChecked(True)
        self.note = QLineEdit(self)
        self.note.setPlaceholderText("why this rule exists")
        self.every_call = QLabel("", self)
        """Shown while the rule has no matcher: it would decide every call of the tool."""
        self.every_call.setTextFormat(Qt.TextFormat.PlainText)
        self.every_call.setWordWrap(True)
        self.every_call.setStyleSheet("color: #b35900; font-weight: bold;")
        self.every_call.hide()
        self._fill_expiry(None)
        self._layout()
        for signal in (self.effect.currentIndexChanged, self.kind.currentIndexChanged, self.tool.textEdited,
                       self.commands.textChanged, self.command_field.textEdited, self.fields.textEdited,
                       self.project.textEdited, self.agent.textEdited, self.session.textEdited):
            signal.connect(self.edited)
        self.kind.currentIndexChanged.connect(self._kind_changed)
        self.effect.currentIndexChanged.connect(self._warn_every_call)
        self.tool.textChanged.connect(self._warn_every_call)
        self._kind_changed()

    def _layout(self) -> None:
        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)  # narrow: labels above their fields
        form.addRow(self.heading)
        top = QHBoxLayout()
        top.addWidget(self.effect)
        top.addWidget(self.kind)
        top.addStretch(1)
        form.addRow("Rule", top)
        form.addRow(self.every_call)
        form.addRow("Tool", self.tool)
        commands = QHBoxLayout()
        commands.addWidget(self.commands, 1)
        commands.addWidget(self.command_field, 0, Qt.AlignmentFlag.AlignTop)
        form.addRow("Commands", commands)
        form.addRow("Other arguments", self.fields)
        scope = QHBoxLayout()
        for edit in (self.project, self.agent, self.session):
            scope.addWidget(edit, 1)
        form.addRow("Only for", scope)
        tail = QHBoxLayout()
        tail.addWidget(self.expiry)
        tail.addWidget(self.enabled)
        tail.addStretch(1)
        form.addRow("Expires", tail)
        form.addRow("Note", self.note)

    def _kind_changed(self, *_args: object) -> None:
        self.commands.setEnabled(self.kind.currentData() == "shell")
        self.command_field.setEnabled(self.kind.currentData() == "shell")
        self.fields.setEnabled(self.kind.currentData() != "any")
        self._warn_every_call()

    def _warn_every_call(self, *_args: object) -> None:
        every = self.kind.currentData() == "any"
        if every:
            tool = self.tool.text().strip() or "the tool"
            self.every_call.setText("⚠ " + every_call_warning(self.effect.currentText(), tool))
        self.every_call.setVisible(every)

    def _fill_expiry(self, kept: datetime | None) -> None:
        self._kept_expiry = kept
        self.expiry.clear()
        if kept is not None:
            self.expiry.addItem(f"at {local_time(kept)}", "kept")
        for label, seconds in EXPIRY_CHOICES:
            self.expiry.addItem(label, seconds)

    # -- form values ----------------------------------------------------------------------
    def form(self) -> RuleForm:
        choice = self.expiry.currentData()
        expires = self._kept_expiry if choice == "kept" else expiry_after(utc_now(), choice)
        return RuleForm(self.effect.currentText(), self.tool.text(), str(self.kind.currentData()),
                        self.commands.toPlainText(), self.fields.text(), self.command_field.text().strip(),
                        self.project.text(), self.agent.text(), self.session.text(), expires, self.note.text(),
                        self.enabled.isChecked(), self._editing.rule_id, self._editing.revision)

    def load(self, form: RuleForm, heading: str) -> None:
        self._editing = form
        self.heading.setText(heading)
        self.effect.setCurrentText(form.effect)
        self.tool.setText(form.tool)
        self.kind.setCurrentIndex(max(0, self.kind.findData(form.kind)))
        self.commands.setPlainText(form.commands)
        self.command_field.setText(form.command_field or "command")
        self.fields.setText(form.fields)
        self.project.setText(form.project_id)
        self.agent.setText(form.agent_id)
        self.session.setText(form.session_id)
        self._fill_expiry(form.expires_at)
        self.enabled.setChecked(form.enabled)
        self.note.setText(form.note)
        self.edited.emit()

    @property
    def rule_id(self) -> str:
        return self._editing.rule_id

    @property
    def loaded_kind(self) -> str:
        """The matcher kind of the rule as loaded (before the operator's edits)."""
        return self._editing.kind
