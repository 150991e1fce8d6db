"""One run's control state, kept current through the bus, and the operator's pause / resume / stop.

The toolbar and the tree's menu ask this model what is possible now (`available`): the source must be able to
control runs (a foreign runtime or a viewer's login cannot: `why_not` says why, shown as the tooltip), and the
action must fit the run's state (the same table the store guards with, `store.control.state.next_state`). The
state comes back through the bus after an action, like every other write; a refusal (someone else resumed it
first, the run finished) is reported in one sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal
from qasync import asyncSlot

from agentdesk.model.services import Services
from agentdesk.model.tasks import LatestTask
from agentdesk.store.control.state import Action, next_state
from agentdesk.store.persistence.bus import RESET, Change, EntityKind
from agentdesk.store.readmodel import ControlState, RunControl
from agentdesk.store.source import Capability, Source, run_action_why_not, run_controller

LABELS = {Action.PAUSE: "Pause", Action.RESUME: "Resume", Action.STOP: "Stop…"}
DONE = {Action.PAUSE: "Paused {run}: its agent blocks at its next checkpoint.",
        Action.RESUME: "Resumed {run}.",
        Action.STOP: "Asked {run} to stop: its agent ends the run cancelled at its next checkpoint."}
STOPPED = "Stopped {run}: the run ended cancelled, its open calls interrupted."


@dataclass(frozen=True, slots=True)
class Shown:
    """What the controls show for one run: its status and control state, read together."""

    run_id: str
    title: str
    status: str
    control: RunControl


def read_shown(source: Source, run_id: str) -> Shown:
    run = source.run(run_id)
    controller = run_controller(source)
    control = controller.run_control(run_id) if controller is not None else RunControl(run_id, ControlState.RUNNING)
    return Shown(run_id, run.title, run.status, control)


def unavailable(source: Source) -> str:
    """Why this source's runs cannot be controlled at all ("" when they can)."""
    if run_controller(source) is not None and Capability.CONTROL_RUN in source.capabilities:
        return ""
    return source.why_not(Capability.CONTROL_RUN) or "This store's runs cannot be paused or stopped."


def action_unavailable(source: Source, action: Action) -> str:
    """Why `action` can never be taken on this source's runs ("" when the run's state decides): a runtime that
    can only stop (lensagent) says so first, then why the source cannot control runs at all."""
    return run_action_why_not(source, action.value) or unavailable(source)


def why_not(action: Action, shown: Shown | None, source_reason: str) -> str:
    """Why `action` is off for this run now ("" when it may be taken): the tooltip of a disabled control."""
    if source_reason:
        return source_reason
    if shown is None:
        return "Select a run to pause, resume or stop it."
    if next_state(shown.control.state, action, shown.status) is not None:
        return ""
    if shown.status in ("done", "failed", "cancelled") or shown.control.state is ControlState.STOPPED:
        return f"The run has finished ({shown.status})."
    if action is Action.RESUME:
        return "The run is not paused."
    if shown.control.state is ControlState.STOPPING:
        return "The run is already being stopped; its agent ends it at its next checkpoint."
    return "The run is already paused."


class RunControlModel(QObject):
    changed = Signal()
    """The run, its state or what is possible changed: controls re-read `available` and `state_text`."""
    reported = Signal(str)
    """One sentence after an action: done, or why it was refused."""

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._latest = LatestTask(services.runner, on_error=lambda _exc: self._shown(None))
        self.run_id: str | None = None
        self.shown: Shown | None = None
        self.busy = False
        services.bridge.changes.connect(self._on_changes)
        latest = self._latest
        self.destroyed.connect(lambda *_: latest.cancel())  # an answer after the window closed goes nowhere

    @property
    def source_reason(self) -> str:
        return unavailable(self._services.source)

    def set_run(self, run_id: str | None) -> None:
        if run_id == self.run_id:
            return
        self.run_id, self.shown = run_id, None
        self.changed.emit()
        self._reload()

    def action_reason(self, action: Action) -> str:
        """Why `action` is never possible here ("" when the run's state decides): the source, then the action."""
        return action_unavailable(self._services.source, action)

    def limits(self) -> str:
        """What this store's run controls cannot do at all, in one line ("" when they can do everything)."""
        return "" if self.source_reason else next(
            (why for action in Action if (why := run_action_why_not(self._services.source, action.value))), "")

    def stop_consequence(self) -> str:
        """What Stop does here, for the dialog that asks first ("" for the usual checkpoint stop): a runtime that
        can only stop (lensagent) ends the run at once, in its database, and its process is not told."""
        if not run_action_why_not(self._services.source, Action.PAUSE.value):
            return ""
        return ("The run ends cancelled now, its open calls interrupted, naming you. A process of this runtime that "
                "is still running it is not told (it learns of changes only in its own process). A stopped run "
                "cannot be resumed.")

    def why_not(self, action: Action) -> str:
        if self.busy:
            return "Waiting for the store to answer the last action."
        return why_not(action, self.shown, self.action_reason(action))

    def state_text(self) -> str:
        """The run's control state in a few words for the toolbar ("" when no run or never held)."""
        if self.shown is None or self.source_reason:
            return ""
        control = self.shown.control
        return "" if control.set_by is None else control.describe()

    def _reload(self) -> None:
        if self.run_id is None:
            self._latest.cancel()
            return
        self._latest.start(self._read(self.run_id))

    async def _read(self, run_id: str) -> None:
        self._shown(await self._services.runner.run(read_shown, self._services.source, run_id))

    def _shown(self, shown: Shown | None) -> None:
        if shown is not None and shown.run_id != self.run_id:
            return
        self.shown = shown
        self.changed.emit()

    def _on_changes(self, batch: Sequence[Change]) -> None:
        if self.run_id is not None and any(c.op == RESET or (c.entity == EntityKind.RUN and c.id == self.run_id)
                                           for c in batch):
            self._reload()

    @asyncSlot()
    async def act(self, action: Action, reason: str | None = None, run_id: str | None = None) -> None:
        """Pause, resume or stop `run_id` (the current run by default) on the store runner."""
        target = run_id or self.run_id
        controller = run_controller(self._services.source)
        if target is None or controller is None:
            return
        call = {Action.PAUSE: controller.pause_run, Action.RESUME: controller.resume_run,
                Action.STOP: controller.stop_run}[action]
        self.busy = True
        self.changed.emit()
        try:
            after = await self._services.runner.run(call, target, self._services.actor, reason)
        except Exception as exc:  # a refusal (someone else came first, the run finished) is one sentence
            self.reported.emit(str(exc))
        else:
            done = STOPPED if after.state is ControlState.STOPPED else DONE[action]  # lensagent: stopped at once
            self.reported.emit(done.format(run=target))
        finally:
            self.busy = False
            self.changed.emit()
            if target == self.run_id:
                self._reload()
