"""The approval queue's decision workflow: approve, deny with a reason, edit the arguments then approve.

Several selected approvals are decided one by one, each its own compare-and-set
in the store, so one lost race does not undo the others; the results are
reported as they arrive ("approved 3, 1 already denied by bob"). Nothing here
touches the tables after a decision: the store's change event removes the rows.
Dialogs are opened with `open()` and answer through `finished`, so no nested
event loop runs inside a qasync coroutine. The store calls themselves are awaited
in an `@asyncSlot` coroutine (`record`) through `StoreRunner.run`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QDialog, QWidget
from qasync import asyncSlot

from agentdesk.gui.approvals.dialogs import ConfirmHiddenDialog, EditArgumentsDialog, ReasonDialog
from agentdesk.gui.approvals.report import Batch, sentence
from agentdesk.model.approval_format import local_time
from agentdesk.model.approvals.pending import PendingApprovalModel
from agentdesk.model.services import Services
from agentdesk.store import readmodel as rm
from agentdesk.store.source import Capability, decide
from agentdesk.store.text.arguments import arguments_hash, inspect_cached

Dialog = ReasonDialog | EditArgumentsDialog | ConfirmHiddenDialog


class DecisionFlow(QObject):
    """Sends decisions for the queue and reports on them; the queue says what is selected."""

    reported = Signal(str)
    """One result line per approval, as its decision lands."""
    progress = Signal(str)
    """The batch's running summary, as a sentence."""
    busy_changed = Signal()
    """What can be decided changed: buttons should be re-checked."""
    finished = Signal(str, str)
    """(summary, the pending approval to move to or "")."""
    dialog_closed = Signal()

    def __init__(self, services: Services, pending: PendingApprovalModel, parent: QWidget) -> None:
        super().__init__(parent)
        self._services = services
        self._pending = pending
        self._window = parent
        self._deciding: set[str] = set()
        self._mine: set[str] = set()
        """Approvals decided (or tried) here: their removal is a result, not news."""
        self.dialog: Dialog | None = None
        self.displayed: Callable[[str], str | None] = lambda _approval_id: None
        """The hash of the arguments the details pane shows for an approval, if it shows that one."""

    # -- what may be decided --------------------------------------------------------------
    def undecided(self, selected: list[rm.Approval]) -> list[rm.Approval]:
        """Not being decided; expired ones are reported as skipped when the decision runs."""
        return [a for a in selected if a.id not in self._deciding]

    def decidable(self, selected: list[rm.Approval]) -> list[rm.Approval]:
        return [a for a in self.undecided(selected) if not self._pending.is_expired(a)]

    def is_mine(self, approval_id: str) -> bool:
        return approval_id in self._mine

    def why_not(self, selected: list[rm.Approval]) -> str:
        """Why Approve and Deny are unavailable for this selection ("" when they are available)."""
        if self._deciding:
            return "A decision is being recorded…"
        denied = self._services.source.why_not(Capability.APPROVE)
        if denied:
            return denied
        if not selected:
            return "Select a pending approval first."
        if not self.decidable(selected):
            first = selected[0]
            return f"{first.id} expired at {local_time(first.expires_at)}; it can no longer be approved or denied."
        return ""

    def why_not_edit(self, selected: list[rm.Approval]) -> str:
        # A schema that cannot carry edited arguments says so first: reopening with writes would not help.
        return (self._services.source.why_not(Capability.EDIT_ARGUMENTS) or self.why_not(selected)
                or ("" if len(selected) == 1 else "Select exactly one approval to edit its arguments."))

    # -- starting decisions ---------------------------------------------------------------
    def approve(self, approvals: list[rm.Approval]) -> None:
        """One approval with hidden characters asks a second time; several skip those (reported)."""
        suspicious = [a for a in approvals if inspect_cached(a.arguments).suspicious]
        if len(approvals) == 1 and suspicious:
            if self.dialog is None:
                dialog = ConfirmHiddenDialog(approvals[0], inspect_cached(approvals[0].arguments), self._window)
                self._open(dialog, lambda: self.decide(approvals, approve=True))
            return
        self.decide([a for a in approvals if a not in suspicious], approve=True, held=suspicious)

    def deny(self, approvals: list[rm.Approval]) -> None:
        if approvals and self.dialog is None:
            dialog = ReasonDialog(approvals, self._window)
            self._open(dialog, lambda: self.decide(approvals, approve=False, reason=dialog.reason()))

    def edit(self, approvals: list[rm.Approval]) -> None:
        if len(approvals) == 1 and self.dialog is None:
            dialog = EditArgumentsDialog(approvals[0], self._window)
            self._open(dialog, lambda: self.decide(approvals, approve=True, edited=dialog.arguments()))

    def _open(self, dialog: Dialog, accepted: Callable[[], None]) -> None:
        dialog.finished.connect(partial(self._closed, dialog, accepted))
        self.dialog = dialog
        dialog.open()

    def _closed(self, dialog: Dialog, accepted: Callable[[], None], result: int) -> None:
        self.dialog = None
        dialog.deleteLater()
        if result == QDialog.DialogCode.Accepted:
            accepted()
        self.dialog_closed.emit()

    # -- running a batch ------------------------------------------------------------------
    def decide(self, approvals: list[rm.Approval], approve: bool, reason: str | None = None,
               edited: str | None = None, held: list[rm.Approval] | None = None) -> None:
        held = held or []
        if not approvals and not held:
            return
        live = [a for a in approvals if not self._pending.is_expired(a)]  # may have expired meanwhile
        ids = [a.id for a in approvals]
        batch = Batch("approved" if approve else "denied", len(ids) + len(held),
                      self._next_after(ids) if ids else None)
        for approval in held:
            self.reported.emit(batch.held_back(approval, inspect_cached(approval.arguments).reason()))
        self._deciding.update(a.id for a in live)
        self._mine.update(ids)
        self.progress.emit(f"{'Approving' if approve else 'Denying'} {len(live)}…")
        for approval in approvals:
            if approval not in live:
                self.reported.emit(batch.skipped(approval))
        if not live:
            self._finish_batch(batch)
            return
        self.busy_changed.emit()
        self.record(batch, live, approve, reason, edited)

    @asyncSlot()
    async def record(self, batch: Batch, approvals: list[rm.Approval], approve: bool, reason: str | None,
                     edited: str | None) -> None:
        """The batch's decisions, all in flight at once on the qasync loop, each awaited on its own so
        results are reported as they land (and one lost race does not hold up the others)."""
        await asyncio.gather(*(self._record_one(batch, a, approve, reason, edited) for a in approvals))

    async def _record_one(self, batch: Batch, approval: rm.Approval, approve: bool, reason: str | None,
                          edited: str | None) -> None:
        source, actor = self._services.source, self._services.actor
        # what the operator saw (the pane, else the row); the store refuses any other arguments as stale
        shown = self.displayed(approval.id) or arguments_hash(approval.arguments)
        try:
            decided = await self._services.runner.run(partial(decide, expected_arguments_hash=shown), source,
                                                      approval.id, approve, actor, reason, edited)
        except asyncio.CancelledError:  # the window closed (the runner shut down): nobody left to tell
            return
        except Exception as exc:  # a store refusal (conflict, expired, stale) is a result line, not a crash
            self._not_decided(batch, approval, exc)
            return
        self._decided(batch, approval, decided)

    def _next_after(self, ids: list[str]) -> str | None:
        """The pending approval to move to once these are decided: the next one below, else above."""
        order = self._pending.ids()
        last = max(self._pending.row_of(i) for i in ids)
        below = [i for i in order[last + 1:] if i not in ids and i not in self._deciding]
        above = [i for i in reversed(order[:last]) if i not in ids and i not in self._deciding]
        candidates = below + above
        return candidates[0] if candidates else None

    def _decided(self, batch: Batch, approval: rm.Approval, decided: rm.Approval) -> None:
        self.reported.emit(batch.won_line(approval, decided))
        self._finish_one(batch, approval.id)

    def _not_decided(self, batch: Batch, approval: rm.Approval, exc: BaseException) -> None:
        self.reported.emit(batch.lost_line(approval, exc))
        self._pending.refresh([approval.id])  # its change may not have reached us yet
        self._finish_one(batch, approval.id)

    def _finish_one(self, batch: Batch, approval_id: str) -> None:
        batch.done += 1
        self._deciding.discard(approval_id)
        if batch.done < batch.total:
            self.progress.emit(sentence(batch.summary()))
        else:
            self._finish_batch(batch)

    def _finish_batch(self, batch: Batch) -> None:
        summary = batch.summary()
        self.progress.emit(sentence(summary))
        self.finished.emit(summary, batch.next_id or "")
