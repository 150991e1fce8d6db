"""Why the agent API refuses a caller: no valid token (401) or not the agent level's to do (403)."""

from __future__ import annotations

from agentdesk.store.errors import StoreError


class Unauthorized(StoreError):
    """No token, an unknown one, or a revoked one: nothing is read or written."""

    exit_code = 2


class Forbidden(StoreError):
    """The token is valid, but this is another agent's, or an operator's to do."""

    exit_code = 2
