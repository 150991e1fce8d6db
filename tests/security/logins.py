"""Logins at each agentdesk level on a test database, for the red-team suites that attack it with a raw client."""

from __future__ import annotations

import uuid

from tests.conftest import PgCluster


def login_at_level(cluster: PgCluster, url: str, level: str, prefix: str = "rt") -> tuple[str, str]:
    """A fresh login (password `secret`) in the group of `level` ("other agent" is a second agent login);
    returns its name and a URL for it on `url`'s database."""
    name = f"{prefix}_{level.replace(' ', '_')}_{uuid.uuid4().hex[:6]}"
    with cluster.admin() as conn:  # type: ignore[attr-defined]
        conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'secret'")
        conn.execute(f"GRANT agentdesk_{level.split()[-1]} TO {name}")
    scheme, rest = url.split("://", 1)
    return name, f"{scheme}://{name}:secret@{rest.split('@', 1)[1]}"
