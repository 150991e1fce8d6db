"""The critical path as a list beside the waterfall: each span's own contribution to the run's length.

Shown while the critical path is on (key P). Sorted by start like the path
itself; a click selects the span on the waterfall. Agent text is shown as
plain text with hidden characters made visible (`one_line`).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHeaderView, QLabel, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from agentdesk.gui.timeline.drawing import one_line
from agentdesk.store.analysis.layout.tools import PathLanes
from agentdesk.store.text.durations import format_duration

MAX_ROWS = 5000
"""A path longer than this lists its biggest contributors only (the waterfall still shows all of it)."""
LANE_ROLE = Qt.ItemDataRole.UserRole + 1


class PathPanel(QWidget):
    lane_clicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel(textFormat=Qt.TextFormat.PlainText)
        self.title.setWordWrap(True)
        self.table = QTreeWidget()
        self.table.setRootIsDecorated(False)
        self.table.setUniformRowHeights(True)
        self.table.setHeaderLabels(["span", "kind", "self time", "% of run"])
        header = self.table.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in (1, 2, 3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.table.itemClicked.connect(self._clicked)
        self.table.itemActivated.connect(self._clicked)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.table, 1)
        self.path: PathLanes | None = None

    def show_path(self, path: PathLanes | None) -> None:
        self.path = path
        self.table.clear()
        if path is None:
            self.title.setText("")
            return
        data = path.data
        rows = range(len(path))
        if len(path) > MAX_ROWS:  # the biggest contributors, still in path order
            biggest = sorted(sorted(rows, key=lambda i: -float(path.self_time[i]))[:MAX_ROWS])
            rows = biggest  # type: ignore[assignment]
        items = []
        for i in rows:
            lane = int(path.lanes[i])
            item = QTreeWidgetItem([one_line(data.names[lane], 120), one_line(data.kind_names[lane], 20),
                                    format_duration(float(path.self_time[i])),
                                    f"{float(path.share[i]) * 100:.1f} %"])
            item.setData(0, LANE_ROLE, lane)
            item.setTextAlignment(2, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            item.setTextAlignment(3, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            items.append(item)
        self.table.addTopLevelItems(items)
        shown = "" if len(items) == path.described.spans else f" (the {len(items):,} listed)"
        self.title.setText(f"{path.summary().capitalize()}{shown}; {format_duration(path.total)} of the run's time. "
                           "P hides it.")

    def _clicked(self, item: QTreeWidgetItem, _column: int = 0) -> None:
        lane = item.data(0, LANE_ROLE)
        if isinstance(lane, int):
            self.lane_clicked.emit(lane)
