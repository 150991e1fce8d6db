"""What the approval queue tells the operator after the fact: decision results and changes made elsewhere.

Results of our own decisions go to a log under the buttons (newest first, one
line each, plus a running summary). A decision made by someone else, or an
expiry, is news the operator did not cause: it also shows in a banner over the
tables for a few seconds, so a row vanishing from under the cursor is explained.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QListWidget, QVBoxLayout, QWidget

from agentdesk.gui.shared.palette import readable, status_colour
from agentdesk.gui.shared.wrap_label import WrapAnywhereLabel
from agentdesk.model.plain import shown_line
from agentdesk.store import readmodel as rm
from agentdesk.store.errors import AlreadyDecided, Expired

NOTE_MS = 8_000
MAX_RESULTS = 200


def named(approval: rm.Approval) -> str:
    return shown_line(f"{approval.id} ({approval.tool_name})", 160)


def left_text(approval_id: str, approval: rm.Approval | None) -> str:
    """Why an approval left the pending table without us deciding it."""
    if approval is None:
        return f"{approval_id} was removed from the store"
    if approval.status == rm.ApprovalStatus.EXPIRED:
        return f"{named(approval)} expired"
    if approval.status == rm.ApprovalStatus.WITHDRAWN:
        return f"{named(approval)} was withdrawn by the agent"
    return f"{named(approval)} was {approval.status} by {shown_line(approval.decider or 'the runtime', 120)}"


def sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


@dataclass
class Batch:
    """One press of Approve/Deny over several approvals; reports as each decision lands."""

    verb: str
    total: int
    next_id: str | None
    done: int = 0
    won: int = 0
    expired: int = 0
    failed: int = 0
    held: int = 0
    lost: Counter[tuple[str, str]] = field(default_factory=Counter)

    def summary(self) -> str:
        parts = [f"{self.verb} {self.won}"]
        parts += [f"{n} already {status} by {actor}" for (status, actor), n in self.lost.items()]
        if self.held:
            parts.append(f"{self.held} skipped (hidden characters: approve each on its own)")
        if self.expired:
            parts.append(f"{self.expired} expired")
        if self.failed:
            parts.append(f"{self.failed} failed")
        pending = self.total - self.done
        return ", ".join(parts) + (f" ({pending} still running…)" if pending else "")

    def skipped(self, approval: rm.Approval) -> str:
        """Counts an approval that expired before its decision was sent."""
        self.expired += 1
        self.done += 1
        return f"✖ {named(approval)} expired; skipped"

    def held_back(self, approval: rm.Approval, reason: str) -> str:
        """Counts an approval a bulk approval skipped because of what its arguments hide."""
        self.held += 1
        self.done += 1
        return f"✖ {named(approval)} skipped: its arguments contain {reason}; approve it on its own"

    def won_line(self, approval: rm.Approval, decided: rm.Approval) -> str:
        self.won += 1
        mark = "✔" if decided.status == rm.ApprovalStatus.APPROVED else "⊘"  # a denial is no tick
        return f"{mark} {named(approval)} {decided.status}"

    def lost_line(self, approval: rm.Approval, exc: BaseException) -> str:
        """Counts a decision the store refused, and says why."""
        if isinstance(exc, AlreadyDecided):
            actor = shown_line(exc.actor or "the runtime", 80)
            self.lost[(exc.status, actor)] += 1
            return f"✖ {named(approval)} was already {exc.status} by {actor}"
        if isinstance(exc, Expired):
            self.expired += 1
            return f"✖ {named(approval)} expired before the decision"
        self.failed += 1
        return f"✖ {named(approval)}: {shown_line(str(exc), 400)}"


class NoteBanner(WrapAnywhereLabel):
    """A plain-text banner in the warning colour that hides itself after `NOTE_MS`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("", parent)  # names a tool: one long word breaks instead of widening the queue
        self.setAutoFillBackground(True)
        self.setContentsMargins(6, 3, 6, 3)
        self.hide()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.hide)

    def show_text(self, text: str) -> None:
        palette = self.palette()
        palette.setColor(QPalette.ColorRole.Window, self._background(palette))
        self.setPalette(palette)
        self.setText(text)
        self.show()
        self._timer.start(NOTE_MS)

    @staticmethod
    def _background(palette: QPalette) -> QColor:
        """A pale warning tint on light palettes, a deep one on dark: the text colour stays legible."""
        waiting = status_colour("waiting")
        if palette.color(QPalette.ColorRole.Base).lightness() > 128:
            return readable(waiting, palette).lighter(170)
        return waiting.darker(260)


class ResultLog(QWidget):
    """The running summary of a batch of decisions and one line per decision, newest first."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = WrapAnywhereLabel("", self)
        self.lines = QListWidget(self)
        self.lines.setMaximumHeight(72)
        self.lines.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.lines.hide()
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.summary)
        box.addWidget(self.lines)

    def finish(self, summary: str) -> None:
        """A batch ended: its summary joins the log as a line (newest first), so later news (decisions
        made elsewhere, expiries) is never listed under a stale "Denied 1"."""
        self.summary.setText("")
        self.add(f"Σ {sentence(summary)}")

    def add(self, line: str) -> None:
        self.lines.insertItem(0, line)
        while self.lines.count() > MAX_RESULTS:
            self.lines.takeItem(self.lines.count() - 1)
        self.lines.show()
