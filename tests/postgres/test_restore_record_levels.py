"""Only the owner may append the records that excuse a restore: every level, with a raw SQL client, is refused.

A `store.restore` record is what lets `verify` accept records gone from the anchor (store/audit/restore.py),
so a login that could append one could hide a truncation; `store.backup` and `audit.rebase` likewise.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from agentdesk.store.audit import restore as marks
from agentdesk.store.persistence.postgres.engine import libpq_url

ACTIONS = (marks.RESTORE_ACTION, marks.BACKUP_ACTION, marks.REBASE_ACTION)


@pytest.mark.parametrize("level", ["agent", "viewer", "operator", "admin"])
def test_no_level_may_append_a_restore_backup_or_rebase_record(
        level: str, make_login: Callable[[str | None], tuple[str, str]]) -> None:
    name, url = make_login(level)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        for action in ACTIONS:
            with pytest.raises(psycopg.Error) as refused:
                conn.execute("SELECT * FROM agentdesk_audit_append(%s, %s, %s, %s, %s, %s)",
                             ("1.5", name, action, marks.ENTITY, "x",
                              '{"backup_id":"x","backup_seq":1,"head":1,"taken_at":1.0}'))
            assert isinstance(refused.value, psycopg.errors.InsufficientPrivilege | psycopg.errors.RaiseException), \
                f"{level} appended {action}: {refused.value}"
            with pytest.raises(psycopg.Error):
                conn.execute("INSERT INTO audit_log (at, actor, action, entity, entity_id, payload, prev_hash, hash) "
                             "VALUES (1.5, %s, %s, 'store', 'x', '{}', '', '')", (name, action))
