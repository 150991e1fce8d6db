"""Agent tokens: the identity an agent presents to the receiver's agent API instead of opening the store.

A token is 32 random bytes (urlsafe base64, prefixed `adt_` so a leaked one is recognisable
in a log or a repository). Only its sha256 is stored (migration 0011, `agent_tokens`), so a copy
of the store does not hand out working tokens; the token itself is shown once, when it is made.
Creating and revoking are operator writes like any other: one unit of work, an audit record, a
change-log row. Checking a presented token is one indexed read by hash and a constant-time
compare; a revoked or unknown token is refused. `last_used_at` is stamped at most once per
`STAMP_EVERY_S` per token (by the caller, `stamp_used`), so an agent's polling costs no writes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlalchemy import select, text, update

from agentdesk.store.errors import InvalidInput, NotFound
from agentdesk.store.ids import new_id
from agentdesk.store.persistence import schema as sc
from agentdesk.store.persistence.database import Store
from agentdesk.store.uow import UnitOfWork
from agentdesk.store.validation import check_name

PREFIX = "adt_"
TOKEN_BYTES = 32
MAX_TOKEN_CHARS = 200
"""A presented token longer than this is refused without hashing it."""
MAX_NAME_CHARS = 100
STAMP_EVERY_S = 300.0


@dataclass(frozen=True, slots=True)
class AgentToken:
    """A token as listed: never the token itself (it is not kept), its name and its history."""

    id: str
    name: str
    created_at: float
    created_by: str
    revoked_at: float | None
    last_used_at: float | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True, slots=True)
class AgentIdentity:
    """Who a verified token says the caller is: an agent, by the token's name."""

    token_id: str
    name: str


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_token() -> str:
    return PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(TOKEN_BYTES)).decode().rstrip("=")


def check_token_name(name: str) -> str:
    value = check_name("token name", name)
    if len(value) > MAX_NAME_CHARS:
        raise InvalidInput(f"A token name is at most {MAX_NAME_CHARS} characters; this one has {len(value)}.")
    if not value.isprintable():
        raise InvalidInput("A token name must be printable text (no control or hidden characters).")
    return value


def create(store: Store, name: str, created_by: str) -> tuple[AgentToken, str]:
    """A new token for the agent identity `name`; returns it as listed and the token (shown once)."""
    name = check_token_name(name)
    created_by = check_name("creator name", created_by)
    token, token_id = new_token(), new_id("tok")
    with UnitOfWork(store) as uow:
        row = sc.AgentTokenRow(id=token_id, name=name, token_hash=hash_token(token), created_at=uow.now,
                               created_by=created_by, revoked_at=None, last_used_at=None)
        uow.session.add(row)
        uow.record("agent_token", "insert", token_id)
        uow.audit(created_by, "agent_token.create", "agent_token", token_id, {"name": name})
        listed = _listed(row)
    return listed, token


def list_tokens(store: Store) -> list[AgentToken]:
    T = sc.AgentTokenRow
    with store.reading() as s:
        return [_listed(row) for row in s.execute(select(T).order_by(T.created_at, T.id)).scalars()]


def revoke(store: Store, name_or_id: str, actor: str) -> list[AgentToken]:
    """Revoke the token with this id, or every active token of this name; returns what was revoked."""
    key = check_name("token name or id", name_or_id)
    actor = check_name("actor name", actor)
    T = sc.AgentTokenRow
    with UnitOfWork(store) as uow:
        rows = uow.session.execute(select(T).where(T.id == key)).scalars().all() or \
            uow.session.execute(select(T).where(T.name == key, T.revoked_at.is_(None))).scalars().all()
        if not rows:
            raise NotFound(f"There is no active agent token named or numbered {key}.")
        if store.is_postgres:  # lock them first: an agent login holding a token row is ended, not waited for (0013)
            uow.session.execute(text("SELECT agentdesk_lock_tokens(CAST(:ids AS text[]))"),
                                {"ids": [row.id for row in rows]})
        revoked = []
        for row in rows:
            if row.revoked_at is not None:
                raise InvalidInput(f"The agent token {row.id} ({row.name}) was already revoked.")
            row.revoked_at = uow.now
            uow.record("agent_token", "update", row.id)
            uow.audit(actor, "agent_token.revoke", "agent_token", row.id, {"name": row.name})
            revoked.append(_listed(row))
    return revoked


def verify(store: Store, presented: str | None) -> AgentIdentity | None:
    """The identity of a presented token; None for no token, an unknown one, or a revoked one."""
    if not presented or len(presented) > MAX_TOKEN_CHARS:
        return None
    digest = hash_token(presented)
    T = sc.AgentTokenRow
    with store.reading() as s:
        row = s.execute(select(T.id, T.name, T.token_hash, T.revoked_at).where(T.token_hash == digest)).first()
    if row is None or not hmac.compare_digest(row.token_hash, digest) or row.revoked_at is not None:
        return None
    return AgentIdentity(row.id, row.name)


def stamp_used(store: Store, token_id: str, at: float) -> None:
    """Record when a token was last used (no audit record, no change-log row: it decides nothing)."""
    T = sc.AgentTokenRow
    with UnitOfWork(store, runtime=True) as uow:
        uow.session.execute(update(T).where(T.id == token_id).values(last_used_at=at)
                            .execution_options(synchronize_session=False))


def _listed(row: sc.AgentTokenRow) -> AgentToken:
    return AgentToken(row.id, row.name, row.created_at, row.created_by, row.revoked_at, row.last_used_at)
