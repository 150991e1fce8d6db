"""Whether the connection to a PostgreSQL store is encrypted, as the server sees it (`pg_stat_ssl`).

libpq's default `sslmode=prefer` falls back to an unencrypted connection without a word when the
server offers no TLS, so agentdesk says which it got: the window's status bar ("encrypted (TLS)" /
"unencrypted") and `agentdesk info`. `sslmode=verify-full` in the store URL makes the fallback
(and a server whose certificate does not match its name) a refused connection instead
(docs/postgres.md, "TLS").
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Engine

SSL_SQL = text("SELECT ssl, version, cipher, inet_client_addr() IS NULL AS socket FROM pg_stat_ssl "
               "WHERE pid = pg_backend_pid()")


@dataclass(frozen=True, slots=True)
class Encryption:
    encrypted: bool
    version: str | None = None
    cipher: str | None = None
    socket: bool = False
    """Over a Unix-domain socket: no network between, and TLS does not apply."""

    @property
    def label(self) -> str:
        """The status bar's words."""
        return "encrypted (TLS)" if self.encrypted else "unencrypted (local socket)" if self.socket else "unencrypted"

    @property
    def sentence(self) -> str:
        """The tooltip's and `agentdesk info`'s words."""
        if self.encrypted:
            how = f"{self.version or 'TLS'}, {self.cipher or 'cipher unknown'}"
            return f"The connection to PostgreSQL is encrypted ({how})."
        if self.socket:
            return ("The connection to PostgreSQL is a local Unix socket: it does not cross a network, and TLS does "
                    "not apply to it.")
        return ("The connection to PostgreSQL is not encrypted: anyone on the network path can read it. Put "
                "sslmode=verify-full (and sslrootcert) in the store URL to require TLS and check the server's name.")


def connection_encryption(engine: Engine) -> Encryption | None:
    """The encryption of a connection from `engine`'s pool (None: not PostgreSQL, or not answerable).

    Every connection of a store uses the same URL and so the same sslmode; one stands for all.
    """
    if engine.dialect.name != "postgresql":
        return None
    try:
        with engine.connect() as conn:
            row = conn.execute(SSL_SQL).first()
            if row is None:  # pg_stat_ssl hides nothing of a login's own backend; this is a guard only
                raw = conn.connection.dbapi_connection
                in_use = getattr(getattr(raw, "pgconn", None), "ssl_in_use", None)
                return None if in_use is None else Encryption(bool(in_use))
            return Encryption(bool(row.ssl), row.version, row.cipher, bool(row.socket))
    except Exception:  # the indicator is a hint; an unreachable server is said elsewhere
        return None
