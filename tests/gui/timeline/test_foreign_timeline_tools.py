"""Critical path, find and the minimap on each seed runtime's runs, as on agentdesk's own.

The timeline tools read only what every `Source` offers (span tables, `search_run`'s
fallback scan), so a foreign run must get the same highlight, header summary, side
list, matches and overview as a native one; the database file stays byte-identical.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from agentdesk.gui.timeline.panel import TimelinePanel
from agentdesk.model.services import Services
from agentdesk.store.sources import open_source
from tests.gui.foreign_helpers import KINDS, Kind, digest

WAIT_MS = 5000


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_critical_path_find_and_minimap_on_a_foreign_run(kind: Kind, tmp_path: Path, qtbot: Any) -> None:
    path = tmp_path / f"{kind.name}.sqlite"
    kind.build(path)
    before = digest(path)
    source = open_source(str(path))
    services = Services.create(source, actor="tester")
    panel = TimelinePanel(services)
    qtbot.addWidget(panel)
    panel.resize(1366, 700)
    panel.show()
    try:
        table = source.span_table(kind.live_run)
        assert table.ids, f"{kind.name}'s fixture run has no spans"
        panel.show_run(kind.live_run)
        qtbot.waitUntil(lambda: panel.feed.complete and panel.minimap.overview is not None, timeout=WAIT_MS)
        assert panel.data is not None and len(panel.data) == len(table.ids)
        assert panel.minimap.overview is not None and panel.minimap.overview.lanes == len(table.ids)

        panel.plot.setFocus()
        qtbot.keyClick(panel.plot, Qt.Key.Key_P)
        qtbot.waitUntil(lambda: panel.critical.path is not None, timeout=WAIT_MS)
        assert panel.critical.path is not None and len(panel.critical.path) >= 1
        assert "critical path: " in panel.header.text()
        assert panel.path_panel.table.topLevelItemCount() == len(panel.critical.path)
        assert len(panel.minimap.path) == len(panel.critical.path)

        name = table.names[len(table.names) // 2]  # a span's own name, found by the fallback scan
        wanted = {i for i, n in zip(table.ids, table.names, strict=True) if n == name}
        qtbot.keyClick(panel.plot, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
        qtbot.keyClicks(panel.find_bar.edit, f'"{name}"')
        qtbot.keyClick(panel.find_bar.edit, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: panel.finding.matches is not None, timeout=WAIT_MS)
        assert panel.finding.matches is not None and panel.data is not None
        found = {panel.data.ids[lane] for lane in panel.finding.matches.lanes.tolist()}
        assert wanted <= found, (name, wanted, found)
        assert panel.selected_id in found and len(panel.minimap.matches) == len(found)
    finally:
        panel.close()
        services.close()
        source.close()
    assert digest(path) == before  # looked at, not written
