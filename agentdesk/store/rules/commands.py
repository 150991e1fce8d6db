"""Writing rules: each change is one transaction, compare-and-set on the rule's revision, audited.

Every write appends an audit record (the rule as it was and as it became) and a
change-log row with entity "rule", so every window and the CLI see it at once.
A hit (a rule deciding an approval) only bumps `hit_count`/`last_hit_at`: it
does not change the rule's revision, so an operator editing a rule never loses
a race against the agents it is deciding for.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select, text, update

from agentdesk.store.errors import InvalidInput, NotFound, StaleRevision
from agentdesk.store.ids import new_id
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.convert import ts, ts_opt
from agentdesk.store.persistence.database import Store
from agentdesk.store.rules.model import Effect, Rule, check_effect, editor_order, parse_matcher
from agentdesk.store.uow import UnitOfWork, affected
from agentdesk.store.validation import MAX_SHORT_TEXT, check_name, check_text

ADMIN_ROLE = "agentdesk_admin"
ADMIN_SQL = text(
    "SELECT r.rolsuper OR EXISTS (SELECT 1 FROM pg_auth_members m JOIN pg_roles a ON a.oid = m.roleid "
    "WHERE a.rolname = :admin AND m.member = r.oid) FROM pg_roles r WHERE r.rolname = current_user")
"""On PostgreSQL a rule may be changed by a superuser or a member of `ADMIN_ROLE` (no error if it does not exist)."""


class NotAdmin(InvalidInput):
    """A non-admin PostgreSQL role tried to change a rule."""


def is_admin(session: Any) -> bool:
    return bool(session.execute(ADMIN_SQL, {"admin": ADMIN_ROLE}).scalar())


def require_admin(uow: UnitOfWork) -> None:
    """Rules decide for everyone: on a shared PostgreSQL store only admins change them (SQLite: the file's owner)."""
    if uow.store.engine.dialect.name == "postgresql" and not is_admin(uow.session):
        raise NotAdmin(f"Only PostgreSQL superusers and members of the {ADMIN_ROLE} role may change rules.")


UNSET: Any = object()
"""Marks an `update_rule` argument the caller did not pass (None is a real value: "no expiry")."""


LATEST_EXPIRY = datetime(9999, 12, 30, tzinfo=UTC)
"""The latest expiry a rule may have (a day short of datetime's end, so any time zone can show it)."""
LATEST_EPOCH = LATEST_EXPIRY.timestamp()


def expiry_of(value: float | None) -> datetime | None:
    """A stored expiry as a time, whatever the row holds: past the end of time is the end of time, and
    -inf, NaN or before 1970 is 1970 (expired). Reading rules never raises on a row written by hand."""
    if value is None:
        return None
    if value != value or value < 0:  # NaN, or before 1970
        return datetime.fromtimestamp(0, UTC)
    if value > LATEST_EPOCH:
        return LATEST_EXPIRY
    return ts(value)


def to_rule(row: Any) -> Rule:
    """A rule value from an ORM `RuleRow` or a Core row of the same columns."""
    return Rule(row.id, Effect(row.effect), row.tool, json.loads(row.matcher), row.project_id, row.agent_id,
                row.session_id, expiry_of(row.expires_at), row.note, bool(row.enabled), row.revision,
                row.created_by, ts(row.created_at), row.hit_count, ts_opt(row.last_hit_at))


def _snapshot(row: sc.RuleRow) -> dict[str, Any]:
    return {"effect": row.effect, "tool": row.tool, "matcher": json.loads(row.matcher),
            "project_id": row.project_id, "agent_id": row.agent_id, "session_id": row.session_id,
            "expires_at": row.expires_at, "note": row.note, "enabled": bool(row.enabled)}


def _check_tool(tool: str) -> str:
    tool = check_name("tool name", tool)
    if len(tool) > 128:
        raise InvalidInput("A tool name is at most 128 characters.")
    return tool


def _check_scope(value: str | None, label: str) -> str | None:
    value = (value or "").strip() or None
    if value is not None and len(value) > 64:
        raise InvalidInput(f"A {label} id is at most 64 characters.")
    return value


def _epoch(value: datetime | float | None) -> float | None:
    """An expiry to store: None (never) or a finite time between 1970 and `LATEST_EXPIRY`."""
    if value is None:
        return None
    epoch = float(value) if isinstance(value, float | int) else value.timestamp()
    if not math.isfinite(epoch) or not 0 <= epoch <= LATEST_EPOCH:
        raise InvalidInput(f"A rule's expiry must be a time between 1970 and {LATEST_EXPIRY.year}, not {value}.")
    return epoch


def add_rule(store: Store, effect: str, tool: str, matcher: dict[str, Any] | str, actor: str, *,
             project_id: str | None = None, agent_id: str | None = None, session_id: str | None = None,
             expires_at: datetime | float | None = None, note: str = "", enabled: bool = True) -> Rule:
    actor = check_name("actor name", actor)
    kind = check_effect(effect)
    tool = _check_tool(tool)
    normal = parse_matcher(tool, matcher)
    note = check_text("note", note.strip(), MAX_SHORT_TEXT)
    expires = _epoch(expires_at)  # refused here, before the transaction: nothing is written
    rid = new_id("rul")
    with UnitOfWork(store) as uow:
        require_admin(uow)
        row = sc.RuleRow(id=rid, effect=kind.value, tool=tool, matcher=json.dumps(normal, sort_keys=True),
                         project_id=_check_scope(project_id, "project"), agent_id=_check_scope(agent_id, "agent"),
                         session_id=_check_scope(session_id, "session"), expires_at=expires,
                         note=note, enabled=enabled, revision=1, created_by=actor, created_at=uow.now,
                         hit_count=0, last_hit_at=None)
        uow.session.add(row)
        uow.session.flush()
        uow.audit(actor, "rule.create", "rule", rid, _snapshot(row))
        uow.record("rule", "insert", rid, {}, 1)
    return get_rule(store, rid)


def update_rule(store: Store, rule_id: str, expected_revision: int, actor: str, *,
                effect: str = UNSET, tool: str = UNSET, matcher: dict[str, Any] | str = UNSET,
                enabled: bool = UNSET, expires_at: datetime | float | None = UNSET, note: str = UNSET,
                project_id: str | None = UNSET, agent_id: str | None = UNSET,
                session_id: str | None = UNSET) -> Rule:
    """Change a rule if nobody changed it since `expected_revision`; raises StaleRevision otherwise."""
    actor = check_name("actor name", actor)
    R = sc.RuleRow
    with UnitOfWork(store) as uow:
        require_admin(uow)
        row = _row(uow, rule_id)
        before = _snapshot(row)
        values: dict[str, Any] = {}
        if effect is not UNSET:
            values["effect"] = check_effect(effect).value
        if tool is not UNSET:
            values["tool"] = _check_tool(tool)
        new_tool = values.get("tool", row.tool)
        if matcher is not UNSET or new_tool != row.tool:
            given = json.loads(row.matcher) if matcher is UNSET else matcher
            values["matcher"] = json.dumps(parse_matcher(new_tool, given), sort_keys=True)
        for column, value in (("project_id", project_id), ("agent_id", agent_id), ("session_id", session_id)):
            if value is not UNSET:
                values[column] = _check_scope(value, column[:-3])
        if enabled is not UNSET:
            values["enabled"] = bool(enabled)
        if expires_at is not UNSET:
            values["expires_at"] = _epoch(expires_at)
        if note is not UNSET:
            values["note"] = check_text("note", note.strip(), MAX_SHORT_TEXT)
        won = affected(uow.session.execute(
            update(R).where(R.id == rule_id, R.revision == expected_revision)
            .values(**values, revision=R.revision + 1).execution_options(synchronize_session=False)))
        if won != 1:
            raise _stale(rule_id, row.revision, expected_revision)
        uow.session.expire_all()
        after = _row(uow, rule_id)
        uow.audit(actor, "rule.update", "rule", rule_id, {"before": before, "after": _snapshot(after),
                                                          "revision": after.revision})
        uow.record("rule", "update", rule_id, {}, after.revision)
    return get_rule(store, rule_id)


def set_rule_enabled(store: Store, rule_id: str, enabled: bool, expected_revision: int, actor: str) -> Rule:
    return update_rule(store, rule_id, expected_revision, actor, enabled=enabled)


def remove_rule(store: Store, rule_id: str, actor: str, expected_revision: int | None = None) -> None:
    """Delete a rule (guarded by its revision when given); approvals it decided keep its id."""
    actor = check_name("actor name", actor)
    R = sc.RuleRow
    with UnitOfWork(store) as uow:
        require_admin(uow)
        row = _row(uow, rule_id)
        revision = row.revision if expected_revision is None else expected_revision
        snapshot = _snapshot(row) | {"hit_count": row.hit_count}
        won = affected(uow.session.execute(delete(R).where(R.id == rule_id, R.revision == revision)
                                           .execution_options(synchronize_session=False)))
        if won != 1:
            raise _stale(rule_id, row.revision, revision)
        uow.audit(actor, "rule.remove", "rule", rule_id, snapshot)
        uow.record("rule", "delete", rule_id, {}, revision)


def record_hit(uow: UnitOfWork, rule_id: str) -> None:
    """Count a decision by this rule inside the deciding transaction (no revision bump)."""
    R = sc.RuleRow
    uow.session.execute(update(R).where(R.id == rule_id)
                        .values(hit_count=R.hit_count + 1, last_hit_at=uow.now)
                        .execution_options(synchronize_session=False))
    revision = uow.session.execute(select(R.revision).where(R.id == rule_id)).scalar()
    uow.record("rule", "update", rule_id, {}, revision)


def list_rules(store: Store) -> list[Rule]:
    """Every rule, in the order the editor shows them (more specific above broader)."""
    with store.reading() as s:
        rows = s.execute(select(sc.RuleRow)).scalars().all()
        return editor_order([to_rule(r) for r in rows])


def live_rules_for(session: Any, tool: str, now: float) -> list[Rule]:
    """The enabled, unexpired rules that could decide a call of `tool` (read inside a transaction)."""
    table = sc.RuleRow.__table__
    c = table.c
    rows = session.execute(select(table).where(c.tool.in_((tool, "*")), c.enabled.is_(True),
                                               c.expires_at.is_(None) | (c.expires_at > now))).all()
    return [to_rule(r) for r in rows]  # Core rows, not ORM objects: this runs inside every request_approval


def get_rule(store: Store, rule_id: str) -> Rule:
    with store.reading() as s:
        row = s.get(sc.RuleRow, rule_id)
        if row is None:
            raise NotFound(f"There is no rule with id {rule_id}.")
        return to_rule(row)


def _row(uow: UnitOfWork, rule_id: str) -> sc.RuleRow:
    row = uow.session.get(sc.RuleRow, rule_id)
    if row is None:
        raise NotFound(f"There is no rule with id {rule_id}.")
    return row


def _stale(rule_id: str, current: int, expected: int) -> StaleRevision:
    return StaleRevision(f"Rule {rule_id} changed since you loaded it (revision {current}, you had "
                         f"{expected}); reload and try again.")
