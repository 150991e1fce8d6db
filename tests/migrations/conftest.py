"""The PostgreSQL fixtures of tests/postgres (a fresh database, logins of each level), for the upgrade tests."""

from tests.postgres.conftest import make_login, pg_url

__all__ = ["make_login", "pg_url"]
