"""anchor location: PostgreSQL anchor lines in format 2, whose MAC covers the line's location (issue 26)

Revision ID: 0014_anchor_location
Revises: 0013_agent_ownership
Create Date: 2026-12-06 06:10:00

PostgreSQL only (a no-op on SQLite, whose anchor lines the client signs in format 2 already):

The server signs anchor lines (its key never leaves it), so format 2 needs server functions beside the older
ones, which stay for lines written before this revision:

- `agentdesk_audit_append_v2(at, actor, action, entity, entity_id, payload, location)`: appends through
  `agentdesk_audit_append` (every check it makes holds) and answers the anchor MAC of format 2. EXECUTE: as
  `agentdesk_audit_append` (operators, agents).
- `agentdesk_audit_head_v2(location)`: the head and its format-2 anchor MAC (a writer's, as
  `agentdesk_audit_head`). EXECUTE: operators, agents.
- `agentdesk_audit_anchors_ok_v2(seqs, hashes, locations, macs)`: whether each format-2 line carries the MAC
  the server gives it; verdicts, never MACs. EXECUTE: viewers (so every level).
- `agentdesk_json_string(text)`: a text as Python's `json.dumps(..., ensure_ascii=True)` writes it; internal.

The MAC of format 2 is HMAC-SHA256 of the bytes of
`json.dumps(["agentdesk-audit-anchor", 2, store_id, seq, hash, location], ensure_ascii=True)`, which is
`["agentdesk-audit-anchor", 2, "<store>", <seq>, "<hash>", "<location>"]` (", " between items; each string
escaped as Python escapes it: `\\"`, `\\\\`, `\\b \\f \\n \\r \\t`, every other character outside space..`~`
as `\\u` and four lowercase hex digits, astral characters as a surrogate pair), as the client's
`keys._anchor_mac_v2` computes it. The SQL is written out here, not imported, so the revision stays what it
was when later code changes.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0014_anchor_location'
down_revision = '0013_agent_ownership'
branch_labels = None
depends_on = None

SAFE = "SET search_path = pg_catalog, pg_temp"

FUNCTIONS = [
    # Python's json.dumps of one str with ensure_ascii=True; the common case (printable ASCII without " or \)
    # is one regex match, the rest one character at a time.
    f"""
    CREATE FUNCTION public.agentdesk_json_string(value text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT {SAFE} AS $$
    DECLARE
        out text := '';
        c text;
        code int;
    BEGIN
        IF value ~ '^[ !#-\\[\\]-~]*$' THEN
            RETURN '"' || value || '"';
        END IF;
        FOREACH c IN ARRAY regexp_split_to_array(value, '') LOOP
            code := ascii(c);
            out := out || CASE
                WHEN c = '"' THEN '\\"'
                WHEN c = '\\' THEN '\\\\'
                WHEN code = 8 THEN '\\b'
                WHEN code = 12 THEN '\\f'
                WHEN code = 10 THEN '\\n'
                WHEN code = 13 THEN '\\r'
                WHEN code = 9 THEN '\\t'
                WHEN code BETWEEN 32 AND 126 THEN c
                WHEN code < 65536 THEN '\\u' || lpad(to_hex(code), 4, '0')
                ELSE '\\u' || lpad(to_hex(55296 + ((code - 65536) >> 10)), 4, '0')
                     || '\\u' || lpad(to_hex(56320 + ((code - 65536) & 1023)), 4, '0') END;
        END LOOP;
        RETURN '"' || out || '"';
    END $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_audit_anchor_text(store text, seq bigint, hash text, location text)
    RETURNS text LANGUAGE sql IMMUTABLE {SAFE} AS $$
        SELECT '["agentdesk-audit-anchor", 2, ' || public.agentdesk_json_string(coalesce(store, '')) || ', '
               || seq || ', ' || public.agentdesk_json_string(hash) || ', '
               || public.agentdesk_json_string(location) || ']'
    $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_audit_append_v2(at_text text, actor text, action text, entity text,
                                                     entity_id text, payload text, location text)
    RETURNS TABLE (seq bigint, hash text, mac text, anchor_mac text)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        r record;
        k public.agentdesk_audit_key;
        store text;
    BEGIN
        IF location IS NULL THEN
            RAISE EXCEPTION 'an anchor line needs its location' USING ERRCODE = 'null_value_not_allowed';
        END IF;
        SELECT * INTO r FROM public.agentdesk_audit_append(at_text, actor, action, entity, entity_id, payload);
        SELECT * INTO k FROM public.agentdesk_audit_key WHERE id = 1;
        SELECT m.value INTO store FROM public.agentdesk_meta m WHERE m.key = 'store_id';
        RETURN QUERY SELECT r.seq::bigint, r.hash::text, r.mac::text, public.agentdesk_hmac(
            k.inner_pad, k.outer_pad, public.agentdesk_audit_anchor_text(store, r.seq, r.hash, location));
    END $$
    """,
    # The head and its format-2 anchor MAC: it signs only the head the table holds, so it forges nothing.
    f"""
    CREATE FUNCTION public.agentdesk_audit_head_v2(location text)
    RETURNS TABLE (seq bigint, hash text, anchor_mac text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        k public.agentdesk_audit_key;
        store text;
    BEGIN
        PERFORM public.agentdesk_require_writer('anchoring the audit');
        IF location IS NULL THEN
            RAISE EXCEPTION 'an anchor line needs its location' USING ERRCODE = 'null_value_not_allowed';
        END IF;
        SELECT * INTO k FROM public.agentdesk_audit_key WHERE id = 1;
        SELECT m.value INTO store FROM public.agentdesk_meta m WHERE m.key = 'store_id';
        RETURN QUERY SELECT a.seq::bigint, a.hash::text, public.agentdesk_hmac(k.inner_pad, k.outer_pad,
            public.agentdesk_audit_anchor_text(store, a.seq, a.hash, location))
            FROM public.audit_log a ORDER BY a.seq DESC LIMIT 1;
    END $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_audit_anchors_ok_v2(seqs bigint[], hashes text[], locations text[],
                                                         macs text[])
    RETURNS boolean[] LANGUAGE plpgsql STABLE SECURITY DEFINER {SAFE} AS $$
    DECLARE
        k public.agentdesk_audit_key;
        store text;
    BEGIN
        PERFORM public.agentdesk_require('viewer');
        SELECT * INTO k FROM public.agentdesk_audit_key WHERE id = 1;
        SELECT m.value INTO store FROM public.agentdesk_meta m WHERE m.key = 'store_id';
        RETURN ARRAY(
            SELECT coalesce(p.m = public.agentdesk_hmac(k.inner_pad, k.outer_pad,
                                public.agentdesk_audit_anchor_text(store, p.s, p.h, p.l)), false)
            FROM unnest(seqs, hashes, locations, macs) WITH ORDINALITY AS p(s, h, l, m, n) ORDER BY p.n);
    END $$
    """,
]

APPEND_V2 = "agentdesk_audit_append_v2(text, text, text, text, text, text, text)"
HEAD_V2 = "agentdesk_audit_head_v2(text)"
ANCHORS_OK_V2 = "agentdesk_audit_anchors_ok_v2(bigint[], text[], text[], text[])"
INTERNAL = ("agentdesk_json_string(text)", "agentdesk_audit_anchor_text(text, bigint, text, text)")

GRANTS = [
    *(f"REVOKE ALL ON FUNCTION public.{f} FROM PUBLIC" for f in (APPEND_V2, HEAD_V2, ANCHORS_OK_V2, *INTERNAL)),
    # as agentdesk_audit_append (0008, 0012), agentdesk_audit_head (0008, 0012), agentdesk_audit_anchors_ok (0008)
    f"GRANT EXECUTE ON FUNCTION public.{APPEND_V2} TO agentdesk_operator, agentdesk_agent",
    f"GRANT EXECUTE ON FUNCTION public.{HEAD_V2} TO agentdesk_operator, agentdesk_agent",
    f"GRANT EXECUTE ON FUNCTION public.{ANCHORS_OK_V2} TO agentdesk_viewer",
]


def _run(bind: sa.Connection, statement: str) -> None:
    """One statement through the driver, no parameters: function bodies hold % and : that must stay as written."""
    cursor = bind.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(statement)
    finally:
        cursor.close()


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for statement in [*FUNCTIONS, *GRANTS]:
        _run(bind, statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for function in (APPEND_V2, HEAD_V2, ANCHORS_OK_V2, *INTERNAL[::-1]):
        _run(bind, f"DROP FUNCTION IF EXISTS public.{function}")
