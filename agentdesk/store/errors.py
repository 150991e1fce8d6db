"""Typed errors that every layer can show to an operator as one clear sentence.

Each error carries the CLI exit code it maps to, so the command line and the GUI
agree on what kind of failure happened without string matching.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of all errors the store raises on purpose."""

    exit_code = 1


class InvalidInput(StoreError):
    """The caller gave something the store refuses (bad JSON, oversize payload, wrong shape)."""

    exit_code = 2


class Conflict(StoreError):
    """A compare-and-set guard failed: someone else changed the thing first, or it expired."""

    exit_code = 3


class AlreadyDecided(Conflict):
    """An approval was decided by someone else; says who and when."""

    def __init__(self, approval_id: str, status: str, actor: str | None, at: str | None) -> None:
        who = actor or "the runtime"
        super().__init__(f"Approval {approval_id} was already {status} by {who} at {at}.")
        self.approval_id = approval_id
        self.status = status
        self.actor = actor
        self.at = at


class Expired(Conflict):
    """An approval's deadline passed before the decision arrived."""


class StaleRevision(Conflict):
    """The caller's view of a revision is out of date; reload and try again."""


class Unsupported(StoreError):
    """The source cannot carry out this command at all (its schema or runtime has no way to)."""

    exit_code = 2


class PermissionRefused(StoreError):
    """The database login's level does not allow this write (PostgreSQL): one sentence naming the level needed,
    such as "carol is a viewer; deciding needs operator". Nothing was written."""

    exit_code = 2


class NotFound(StoreError):
    exit_code = 4


class StoreUnavailable(StoreError):
    """The store cannot be read: not a database, another schema, newer version, or locked."""

    exit_code = 5


class NoStore(StoreUnavailable):
    """Nothing at the location: the message says how to create it (the CLI adds the `--store` it was given)."""

    def __init__(self, path: object) -> None:
        super().__init__(f"There is no store at {path}; run `agentdesk init` to create one.")
        self.path = path


class SchemaBehind(StoreUnavailable):
    """The store's schema is older than this agentdesk's and this open may not upgrade it (a read-only open, or
    a login that does not own the store): one sentence saying who upgrades it and how, instead of the failure
    the first query on a table or column that is not there yet would give. Exit 5, as every unusable store."""

    def __init__(self, current: str, head: str, who_upgrades: str) -> None:
        super().__init__(f"This store's schema is at {current}, agentdesk needs {head}: {who_upgrades}.")
        self.current = current
        self.head = head


class ReadOnlyStore(StoreUnavailable):
    """A write was attempted on a store opened read-only."""


class AuditChainBroken(StoreError):
    exit_code = 6


class ServerUnreachable(StoreUnavailable):
    """The database server could not be reached (stopped, restarting, network) and nothing of the call was applied:
    trying the same call again once the server is back is safe (store/persistence/outage.py)."""


class CommitUnknown(StoreUnavailable):
    """The connection was lost while a commit was on its way and the server never came back to say whether it
    landed: trying again could apply the write twice, so the caller must look before retrying."""
