"""pg functions: the audit is appended and signed by the server; decisions go through SECURITY DEFINER functions

Revision ID: 0008_pg_functions
Revises: 0007_audit_hmac
Create Date: 2026-12-02 04:30:00

PostgreSQL only (a no-op on SQLite, whose single user needs none of it):

- `agentdesk_audit_key` holds the store's audit key inside the database, readable by
  the owning role only (no grant to any agentdesk group): a login can neither read it
  nor write the audit table; it appends through `agentdesk_audit_append`, which runs
  as the owner, takes the chain's tail, builds exactly the body Python's
  `store.audit.chain.record_hash` hashes, and signs it. Verification stays in
  Python except the MAC, which `agentdesk_audit_macs_ok` answers (yes/no per
  record; the key never leaves the server), so `verify` works from any machine.
- The HMAC is built by hand from the built-in sha256() (PostgreSQL 11+), and the key
  comes from gen_random_uuid() (PostgreSQL 13+, pg_strong_random): no extension, so
  no CREATE privilege and no pgcrypto package are needed.
- Every SECURITY DEFINER function fixes `search_path = pg_catalog, pg_temp` and names
  the store's tables as public.*, so no object a login creates can stand in for ours;
  EXECUTE is revoked from PUBLIC and granted to the group that may call it, and each
  checks `pg_has_role(session_user, …)` itself since it runs as the owner.

The SQL is written out here, not imported, so the revision stays what it was when
later code changes. The lead re-chains it at merge.
"""
from __future__ import annotations

from alembic import op

revision = '0008_pg_functions'
down_revision = '0007_audit_hmac'
branch_labels = None
depends_on = None

WRITER_LOCK = 0x61677731
"""store/postgres/engine.py's WRITER_LOCK: the function takes it too, so a hand-written client serialises."""

SAFE = "SET search_path = pg_catalog, pg_temp"

HELPERS = [
    # Python's json.dumps(str, ensure_ascii=False) and PostgreSQL's escape_json agree: both escape
    # " \\ \b \f \n \r \t by name and other characters below U+0020 as \u00xx (lower-case hex), and
    # pass everything else (DEL, non-ASCII, emoji) through as is. tests/postgres/test_server_audit.py
    # checks that on quotes, backslashes, control characters, non-ASCII and emoji.
    f"""
    CREATE FUNCTION public.agentdesk_json(value text) RETURNS text LANGUAGE sql IMMUTABLE {SAFE} AS $$
        SELECT coalesce(to_json(value)::text, 'null')
    $$
    """,
    # repr() of a Python float: the shortest text that reads back as the same double, which is what
    # float8out prints with extra_float_digits >= 1 (PostgreSQL 12+), plus Python's ".0" on integers.
    # Differs for magnitudes of 1e15 to 1e16 (Python prints digits, PostgreSQL an exponent): times are not.
    f"""
    CREATE FUNCTION public.agentdesk_py_float(value float8) RETURNS text LANGUAGE sql IMMUTABLE STRICT
    {SAFE} SET extra_float_digits = 1 AS $$
        SELECT CASE WHEN t ~ '^-?[0-9]+$' THEN t || '.0' ELSE t END FROM (SELECT value::text AS t) s
    $$
    """,
    # HMAC-SHA256 (RFC 2104) from its two padded keys, so each MAC is two sha256() calls.
    f"""
    CREATE FUNCTION public.agentdesk_hmac(inner_pad bytea, outer_pad bytea, message text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT {SAFE} AS $$
        SELECT encode(sha256(outer_pad || sha256(inner_pad || convert_to(message, 'UTF8'))), 'hex')
    $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_hmac_pad(secret bytea, byte int) RETURNS bytea
    LANGUAGE plpgsql IMMUTABLE STRICT {SAFE} AS $$
    DECLARE
        k bytea := CASE WHEN length(secret) > 64 THEN sha256(secret) ELSE secret END;
    BEGIN
        k := k || decode(repeat('00', 64 - length(k)), 'hex');
        FOR i IN 0..63 LOOP
            k := set_byte(k, i, get_byte(k, i) # byte);
        END LOOP;
        RETURN k;
    END $$
    """,
    # The body record_hash hashes: canonical_json([prev_hash, repr(at), actor, action, entity, entity_id,
    # payload]) -> "[" + the seven JSON strings joined by "," + "]", as UTF-8.
    f"""
    CREATE FUNCTION public.agentdesk_record_hash(prev_hash text, at_text text, actor text, action text,
                                                 entity text, entity_id text, payload text) RETURNS text
    LANGUAGE sql IMMUTABLE {SAFE} AS $$
        SELECT encode(sha256(convert_to('[' || public.agentdesk_json(prev_hash) || ','
            || public.agentdesk_json(at_text) || ',' || public.agentdesk_json(actor) || ','
            || public.agentdesk_json(action) || ',' || public.agentdesk_json(entity) || ','
            || public.agentdesk_json(entity_id) || ',' || public.agentdesk_json(payload) || ']', 'UTF8')), 'hex')
    $$
    """,
]

KEY = [
    # One row: the secret's two HMAC pads (the secret itself is not kept: the pads are all signing needs),
    # and the first record seq it signs. No grant to any group: only the owner (and superusers) read it.
    """
    CREATE TABLE public.agentdesk_audit_key (
        id int PRIMARY KEY CHECK (id = 1),
        inner_pad bytea NOT NULL,
        outer_pad bytea NOT NULL,
        keyed_from bigint NOT NULL,
        created_at float8 NOT NULL
    )
    """,
    "REVOKE ALL ON public.agentdesk_audit_key FROM PUBLIC, agentdesk_viewer, agentdesk_operator, agentdesk_admin",
    """
    INSERT INTO public.agentdesk_audit_key (id, inner_pad, outer_pad, keyed_from, created_at)
    SELECT 1, public.agentdesk_hmac_pad(secret, 54), public.agentdesk_hmac_pad(secret, 92),
           coalesce((SELECT max(seq) FROM public.audit_log), 0) + 1, extract(epoch FROM clock_timestamp())
    FROM (SELECT sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text
                                   || gen_random_uuid()::text, 'UTF8')) AS secret) s
    """,
]

AUDIT = [
    # The one way to add an audit record. `at_text` must be repr() of the time as Python prints it (the
    # hash covers that text and `verify` recomputes it from the stored float), so it is refused otherwise.
    f"""
    CREATE FUNCTION public.agentdesk_audit_append(at_text text, actor text, action text, entity text,
                                                  entity_id text, payload text)
    RETURNS TABLE (seq bigint, hash text, mac text, anchor_mac text)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        k public.agentdesk_audit_key;
        at_value float8;
        tail text;
        digest text;
        signature text;
        new_seq bigint;
        store text;
    BEGIN
        IF NOT pg_has_role(session_user, 'agentdesk_operator', 'MEMBER') THEN
            RAISE EXCEPTION 'permission denied: login % is not an agentdesk operator, so it may not write '
                            'the audit', session_user USING ERRCODE = 'insufficient_privilege';
        END IF;
        BEGIN
            at_value := at_text::float8;
        EXCEPTION WHEN others THEN
            at_value := NULL;
        END;
        IF at_value IS NULL OR public.agentdesk_py_float(at_value) IS DISTINCT FROM at_text THEN
            RAISE EXCEPTION 'the audit time % is not a time as Python prints it (repr of a float)', at_text
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF actor IS NULL OR action IS NULL OR entity IS NULL OR entity_id IS NULL OR payload IS NULL THEN
            RAISE EXCEPTION 'an audit record needs actor, action, entity, entity id and payload'
                USING ERRCODE = 'null_value_not_allowed';
        END IF;
        PERFORM pg_advisory_xact_lock({WRITER_LOCK});
        SELECT * INTO k FROM public.agentdesk_audit_key WHERE id = 1;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'the store has no audit key (agentdesk_audit_key is empty); nothing was written'
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        SELECT a.hash INTO tail FROM public.audit_log a ORDER BY a.seq DESC LIMIT 1;
        tail := coalesce(tail, repeat('0', 64));
        digest := public.agentdesk_record_hash(tail, at_text, actor, action, entity, entity_id, payload);
        signature := public.agentdesk_hmac(k.inner_pad, k.outer_pad, 'agentdesk-audit-record:' || digest);
        INSERT INTO public.audit_log AS a (at, actor, action, entity, entity_id, payload, prev_hash, hash, mac)
            VALUES (at_value, actor, action, entity, entity_id, payload, tail, digest, signature)
            RETURNING a.seq INTO new_seq;
        SELECT m.value INTO store FROM public.agentdesk_meta m WHERE m.key = 'store_id';
        RETURN QUERY SELECT new_seq, digest, signature, public.agentdesk_hmac(
            k.inner_pad, k.outer_pad, 'agentdesk-audit-anchor:' || coalesce(store, '') || ':' || new_seq
            || ':' || digest);
    END $$
    """,
    # Whether each (hash, mac) pair verifies under the key: yes or no, never the MAC itself.
    f"""
    CREATE FUNCTION public.agentdesk_audit_macs_ok(hashes text[], macs text[]) RETURNS boolean[]
    LANGUAGE plpgsql STABLE SECURITY DEFINER {SAFE} AS $$
    DECLARE
        k public.agentdesk_audit_key;
    BEGIN
        IF NOT pg_has_role(session_user, 'agentdesk_viewer', 'MEMBER') THEN
            RAISE EXCEPTION 'permission denied: login % is not an agentdesk viewer', session_user
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        SELECT * INTO k FROM public.agentdesk_audit_key WHERE id = 1;
        RETURN ARRAY(
            SELECT coalesce(p.m = public.agentdesk_hmac(k.inner_pad, k.outer_pad,
                                                        'agentdesk-audit-record:' || p.h), false)
            FROM unnest(hashes, macs) WITH ORDINALITY AS p(h, m, n) ORDER BY p.n);
    END $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_audit_key_info() RETURNS TABLE (keyed_from bigint, created_at float8)
    LANGUAGE sql STABLE SECURITY DEFINER {SAFE} AS $$
        SELECT k.keyed_from, k.created_at FROM public.agentdesk_audit_key k
        WHERE k.id = 1 AND pg_has_role(session_user, 'agentdesk_viewer', 'MEMBER')
    $$
    """,
]

GRANTS = [
    "REVOKE ALL ON FUNCTION public.agentdesk_audit_append(text, text, text, text, text, text) FROM PUBLIC",
    "REVOKE ALL ON FUNCTION public.agentdesk_audit_macs_ok(text[], text[]) FROM PUBLIC",
    "REVOKE ALL ON FUNCTION public.agentdesk_audit_key_info() FROM PUBLIC",
    "GRANT EXECUTE ON FUNCTION public.agentdesk_audit_append(text, text, text, text, text, text) "
    "TO agentdesk_operator",
    "GRANT EXECUTE ON FUNCTION public.agentdesk_audit_macs_ok(text[], text[]) TO agentdesk_viewer",
    "GRANT EXECUTE ON FUNCTION public.agentdesk_audit_key_info() TO agentdesk_viewer",
    # Records come only from agentdesk_audit_append now (0005 already took UPDATE, DELETE, TRUNCATE).
    "REVOKE INSERT ON public.audit_log FROM agentdesk_operator, agentdesk_admin",
]

UPGRADE = [*HELPERS, *KEY, *AUDIT, *GRANTS]

DOWNGRADE = [
    "GRANT INSERT ON public.audit_log TO agentdesk_operator",
    "DROP FUNCTION IF EXISTS public.agentdesk_audit_key_info()",
    "DROP FUNCTION IF EXISTS public.agentdesk_audit_macs_ok(text[], text[])",
    "DROP FUNCTION IF EXISTS public.agentdesk_audit_append(text, text, text, text, text, text)",
    "DROP TABLE IF EXISTS public.agentdesk_audit_key",
    "DROP FUNCTION IF EXISTS public.agentdesk_record_hash(text, text, text, text, text, text, text)",
    "DROP FUNCTION IF EXISTS public.agentdesk_hmac_pad(bytea, int)",
    "DROP FUNCTION IF EXISTS public.agentdesk_hmac(bytea, bytea, text)",
    "DROP FUNCTION IF EXISTS public.agentdesk_py_float(float8)",
    "DROP FUNCTION IF EXISTS public.agentdesk_json(text)",
]


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in DOWNGRADE:
        op.execute(statement)
