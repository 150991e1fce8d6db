"""The status bar's "encrypted (TLS)" / "unencrypted" for a PostgreSQL store (store/persistence/postgres/tls.py).

Asked once, off the GUI thread, when the window opens: every connection of a store uses one URL, so
one connection's answer stands for all. SQLite stores show nothing.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QStatusBar

from agentdesk.model.plain import tooltip
from agentdesk.model.services import Services
from agentdesk.model.tasks import spawn
from agentdesk.store.persistence.database import own_store
from agentdesk.store.persistence.postgres.tls import Encryption, connection_encryption


def add_encryption_label(bar: QStatusBar, services: Services) -> QLabel:
    label = QLabel(bar)
    label.setObjectName("encryption")
    label.setTextFormat(Qt.TextFormat.PlainText)
    bar.addPermanentWidget(label)
    store = own_store(services.source)
    if store is None or not store.is_postgres:
        label.hide()
        return label

    def show(found: Encryption | None) -> None:
        if found is None:
            label.hide()
            return
        label.setText(found.label)
        label.setToolTip(tooltip(found.sentence))
        warn = not found.encrypted and not found.socket
        label.setStyleSheet("color: #e5484d;" if warn else "")
        label.show()

    async def ask() -> None:
        try:
            found = await services.runner.run(connection_encryption, store.engine)
        except Exception:  # nothing known about the connection: no claim either way
            label.hide()
            return
        show(found)

    label.hide()
    spawn(ask(), error_signal=services.runner.error)
    return label
