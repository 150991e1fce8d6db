"""least privilege: an agent level, operators who write only through functions, a writers' queue nobody else can lock

Revision ID: 0012_least_privilege
Revises: 0011_agent_tokens
Create Date: 2026-12-06 04:30:00

Both backends: `approvals.requested_login` and `approvals.decided_login` (the server-known login that
asked and that decided; on SQLite, which has no logins, they stay empty).

PostgreSQL only (the rest is a no-op on SQLite, whose single user owns the file):

- Four levels: `agentdesk_agent` (new, beside the others, in none of them) writes what a runtime
  writes (hierarchy, runs, spans, tool calls, context appends, pending approval requests) with
  column-level grants only (so `LOCK TABLE … SHARE` and stronger are refused by PostgreSQL) and no
  DELETE; `agentdesk_viewer` reads; `agentdesk_operator` writes nothing directly: it decides and
  edits through the SECURITY DEFINER functions; `agentdesk_admin` also changes rules, whose every
  change must carry its audit record (a deferred constraint trigger checks it at commit) and a
  revision bump, and prunes the change log.
- Triggers make an approval's decision something only the functions write: an INSERT below the
  owner is pending, with the payload hash the server computes and `requested_login = session_user`;
  a decided approval is final; `decided_login` is whoever's transaction moved it off pending.
- The change log is written only by functions (`agentdesk_log_changes` for a unit of work's rows),
  the audit only by `agentdesk_audit_append`, which now appends for a caller only the actions its
  level may record (an agent's runtime records, an admin's rule and role records); the decision
  functions append through the internal `agentdesk_audit_write`. `seq` columns and their sequences
  are bigint, and no group (nor PUBLIC) may draw or set any sequence.
- The origin of a change is `session_user || '/' || <the caller's origin if it is one of ours, else
  'sql'>`: one login cannot make another login's window skip a change.
- The writers' queue is an EXCLUSIVE lock on `agentdesk_writer_queue` (no grant to anyone; taken only in
  `agentdesk_writer_turn`), not a public advisory lock any login could hold.
  Every function that took `pg_advisory_xact_lock(WRITER_LOCK)` is recreated taking the turn instead.

The SQL is written out here, not imported, so the revision stays what it was when later code changes.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0012_least_privilege'
down_revision = '0011_agent_tokens'
branch_labels = None
depends_on = None

SAFE = "SET search_path = pg_catalog, pg_temp"
GROUPS = "agentdesk_viewer, agentdesk_operator, agentdesk_admin, agentdesk_agent"
OLD_LOCK = "pg_advisory_xact_lock(1634170673)"
"""0008's writer lock (WRITER_LOCK 0x61677731 rendered by its f-strings)."""
NEW_LOCK = "public.agentdesk_writer_turn(false)"

AGENT_INSERT = ("projects", "tasks", "sessions", "agents", "runs", "spans", "span_context_items", "tool_calls",
                "approvals", "context_groups", "context_items", "context_item_revisions", "otel_orphans",
                "import_staging", "otel_resources")
AGENT_UPDATE_ALL = ("projects", "tasks", "sessions", "agents", "runs", "spans", "span_context_items",
                    "context_groups", "otel_orphans", "import_staging", "otel_resources")
"""Every column but the key, granted column by column: a column grant allows no LOCK stronger than ROW EXCLUSIVE."""
AGENT_UPDATE_SOME = {"tool_calls": ("status", "span_id"), "context_items": ("agent_id",),
                     "approvals": ("agent_id", "revision", "span_id")}

ROLE = [
    """
    DO $$
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'agentdesk_agent') THEN
            CREATE ROLE agentdesk_agent NOLOGIN;
        END IF;
    END $$
    """,
    "GRANT USAGE ON SCHEMA public TO agentdesk_agent",
]

WIDTHS = [
    "ALTER TABLE public.change_log ALTER COLUMN seq TYPE bigint",
    "ALTER TABLE public.audit_log ALTER COLUMN seq TYPE bigint",
    "ALTER TABLE public.change_log ALTER COLUMN origin TYPE text",
    """
    DO $$
    BEGIN
        EXECUTE format('ALTER SEQUENCE %s AS bigint', pg_get_serial_sequence('public.change_log', 'seq'));
        EXECUTE format('ALTER SEQUENCE %s AS bigint', pg_get_serial_sequence('public.audit_log', 'seq'));
    END $$
    """,
]

PRIVILEGES = [
    # Nobody below the owner draws or sets a sequence: seqs come only from the functions' INSERTs.
    f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM PUBLIC, {GROUPS}",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM agentdesk_operator",
    # No group writes a table directly unless granted below; no DELETE, TRUNCATE, REFERENCES or TRIGGER.
    f"REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON ALL TABLES IN SCHEMA public FROM PUBLIC, "
    f"{GROUPS}",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE INSERT, UPDATE, DELETE ON TABLES FROM agentdesk_operator",
    # Presence (0009) stays each login's own row (row-level security), looking being reading; column grants and
    # leaving through agentdesk_presence_leave (below), so no viewer may LOCK the table.
    "GRANT SELECT, INSERT, UPDATE (approval_id, seen_at) ON public.presence TO agentdesk_viewer",
    "GRANT SELECT ON public.presence TO agentdesk_agent",
    # Agent tokens (0011): an operator makes and revokes them; the agent gate reads them and stamps their use.
    "GRANT INSERT, UPDATE (revoked_at) ON public.agent_tokens TO agentdesk_operator",
    "GRANT SELECT, UPDATE (last_used_at) ON public.agent_tokens TO agentdesk_agent",
    # Rules: an admin's, each change audited and revision-bumped (triggers below). Pruning: an admin's upkeep.
    "GRANT INSERT, UPDATE, DELETE ON public.approval_rules TO agentdesk_admin",
    "GRANT DELETE ON public.change_log TO agentdesk_admin",
    # The agent: reads what a runtime reads back, appends what a runtime writes.
    """
    DO $$
    DECLARE
        t text;
    BEGIN
        FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v')
                 AND c.relname NOT IN ('presence', 'agent_tokens', 'agentdesk_audit_key') LOOP
            EXECUTE format('GRANT SELECT ON public.%I TO agentdesk_agent', t);
        END LOOP;
    END $$
    """,
    f"GRANT INSERT ON {', '.join('public.' + t for t in AGENT_INSERT)} TO agentdesk_agent",
    f"""
    DO $$
    DECLARE
        t text;
        cols text;
    BEGIN
        FOREACH t IN ARRAY ARRAY[{', '.join(repr(t) for t in AGENT_UPDATE_ALL)}] LOOP
            SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO cols FROM pg_attribute a
            WHERE a.attrelid = ('public.' || t)::regclass AND a.attnum > 0 AND NOT a.attisdropped
              AND a.attname NOT IN (SELECT k.attname FROM pg_index i JOIN pg_attribute k
                                    ON k.attrelid = i.indrelid AND k.attnum = ANY (i.indkey)
                                    WHERE i.indrelid = ('public.' || t)::regclass AND i.indisprimary);
            EXECUTE format('GRANT UPDATE (%s) ON public.%I TO agentdesk_agent', cols, t);
        END LOOP;
    END $$
    """,
    *(f"GRANT UPDATE ({', '.join(cols)}) ON public.{t} TO agentdesk_agent" for t, cols in AGENT_UPDATE_SOME.items()),
]

HELPERS = [
    # The owner (the role that migrated the store, or a superuser) is above every level.
    # `who` is session_user for "which login asks" and current_user in triggers: inside agentdesk's SECURITY
    # DEFINER functions current_user is the owner, so a trigger lets the functions' own writes through.
    f"""
    CREATE FUNCTION public.agentdesk_is_owner(who name) RETURNS boolean LANGUAGE sql STABLE {SAFE} AS $$
        SELECT coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = who), false)
            OR pg_has_role(who, (SELECT c.relowner FROM pg_class c
                                 WHERE c.oid = 'public.approvals'::regclass), 'MEMBER')
    $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_is_owner() RETURNS boolean LANGUAGE sql STABLE {SAFE} AS $$
        SELECT public.agentdesk_is_owner(session_user)
    $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_level() RETURNS text LANGUAGE sql STABLE {SAFE} AS $$
        SELECT CASE WHEN public.agentdesk_is_owner() THEN 'owner'
                    WHEN pg_has_role(session_user, 'agentdesk_admin', 'MEMBER') THEN 'admin'
                    WHEN pg_has_role(session_user, 'agentdesk_operator', 'MEMBER') THEN 'operator'
                    WHEN pg_has_role(session_user, 'agentdesk_agent', 'MEMBER') THEN 'agent'
                    WHEN pg_has_role(session_user, 'agentdesk_viewer', 'MEMBER') THEN 'viewer'
                    ELSE 'none' END
    $$
    """,
    # One sentence naming the login, its level and the level needed: "carol is a viewer; deciding needs operator".
    f"""
    CREATE FUNCTION public.agentdesk_refuse(doing text, needs text) RETURNS void LANGUAGE plpgsql {SAFE} AS $$
    DECLARE
        lvl text := public.agentdesk_level();
    BEGIN
        RAISE EXCEPTION '% is %; % needs %', session_user,
            CASE lvl WHEN 'none' THEN 'in no agentdesk group' WHEN 'agent' THEN 'an agent'
                     WHEN 'operator' THEN 'an operator' WHEN 'admin' THEN 'an admin' ELSE 'a ' || lvl END,
            doing, needs USING ERRCODE = 'insufficient_privilege';
    END $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_require(level text, doing text) RETURNS void LANGUAGE plpgsql STABLE {SAFE}
    AS $$
    BEGIN
        IF NOT public.agentdesk_is_owner() AND NOT pg_has_role(session_user, 'agentdesk_' || level, 'MEMBER') THEN
            PERFORM public.agentdesk_refuse(doing, level);
        END IF;
    END $$
    """,
    # 0008's one-argument form, kept for its callers, now saying the same sentence.
    f"""
    CREATE OR REPLACE FUNCTION public.agentdesk_require(level text) RETURNS void LANGUAGE plpgsql STABLE {SAFE}
    AS $$
    BEGIN
        PERFORM public.agentdesk_require(level, 'this');
    END $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_require_writer(doing text) RETURNS void LANGUAGE plpgsql STABLE {SAFE} AS $$
    BEGIN
        IF NOT public.agentdesk_is_owner() AND NOT pg_has_role(session_user, 'agentdesk_operator', 'MEMBER')
           AND NOT pg_has_role(session_user, 'agentdesk_agent', 'MEMBER')
           AND NOT coalesce((SELECT r.rolcreaterole FROM pg_roles r WHERE r.rolname = session_user), false) THEN
            PERFORM public.agentdesk_refuse(doing, 'agent or operator');
        END IF;
    END $$
    """,
    # An operator, or the agent login that requested this approval (withdraw, heartbeat).
    f"""
    CREATE FUNCTION public.agentdesk_require_requester(approval_id text, doing text) RETURNS void
    LANGUAGE plpgsql STABLE {SAFE} AS $$
    BEGIN
        IF public.agentdesk_is_owner() OR pg_has_role(session_user, 'agentdesk_operator', 'MEMBER') THEN
            RETURN;
        END IF;
        IF pg_has_role(session_user, 'agentdesk_agent', 'MEMBER') THEN
            IF NOT EXISTS (SELECT 1 FROM public.approvals p WHERE p.id = approval_id
                           AND p.requested_login IS DISTINCT FROM session_user) THEN
                RETURN;  -- its own request (or none: the caller answers 'not found')
            END IF;
            RAISE EXCEPTION '% is an agent that did not request approval %; % needs operator', session_user,
                approval_id, doing USING ERRCODE = 'insufficient_privilege';
        END IF;
        PERFORM public.agentdesk_refuse(doing, 'operator');
    END $$
    """,
    # The origin a change is logged under: the login, then the caller's origin if it is one of ours.
    f"""
    CREATE FUNCTION public.agentdesk_origin(given text) RETURNS text LANGUAGE sql STABLE {SAFE} AS $$
        SELECT session_user || '/' || CASE WHEN given ~ '^[0-9a-f]{{32}}$' THEN given ELSE 'sql' END
    $$
    """,
]

PRESENCE = [
    f"""
    CREATE FUNCTION public.agentdesk_presence_leave() RETURNS void
    LANGUAGE sql VOLATILE SECURITY DEFINER {SAFE} AS $$
        DELETE FROM public.presence p WHERE p.login = session_user
    $$
    """,
    "REVOKE ALL ON FUNCTION public.agentdesk_presence_leave() FROM PUBLIC",
    f"GRANT EXECUTE ON FUNCTION public.agentdesk_presence_leave() TO {GROUPS}",
]

QUEUE = [
    # The writers' turn: an EXCLUSIVE lock on a table nobody but the owner may lock (no grant to anyone), taken
    # only in agentdesk_writer_turn. A table lock is a queue PostgreSQL grants in order (a row lock is not: a
    # newcomer that finds the row free at the moment it was released takes it ahead of those waiting).
    # Runtime writers first queue among themselves on the one row of agentdesk_runtime_queue, so a decision
    # waits for the transaction in progress and at most one runtime write.
    """
    CREATE TABLE public.agentdesk_writer_queue (
        id int PRIMARY KEY CHECK (id = 1),
        what text NOT NULL
    )
    """,
    """
    CREATE TABLE public.agentdesk_runtime_queue (
        id int PRIMARY KEY CHECK (id = 1),
        what text NOT NULL
    )
    """,
    "INSERT INTO public.agentdesk_writer_queue VALUES (1, 'writers: the turn is an EXCLUSIVE lock on this table')",
    "INSERT INTO public.agentdesk_runtime_queue VALUES (1, 'runtime writers: a row lock on this row first')",
    f"REVOKE ALL ON public.agentdesk_writer_queue, public.agentdesk_runtime_queue FROM PUBLIC, {GROUPS}",
    f"""
    CREATE FUNCTION public.agentdesk_writer_turn(runtime boolean) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    BEGIN
        PERFORM public.agentdesk_require_writer('writing');
        IF runtime THEN
            PERFORM 1 FROM public.agentdesk_runtime_queue q WHERE q.id = 1 FOR UPDATE;
        END IF;
        LOCK TABLE public.agentdesk_writer_queue IN EXCLUSIVE MODE;
    END $$
    """,
]

CHANGES = [
    # 0008's internal change-log writer, now logging the server's origin, not the caller's.
    f"""
    CREATE OR REPLACE FUNCTION public.agentdesk_change(at float8, origin text, entity text, op text,
                                                       entity_id text, parents text, revision int) RETURNS json
    LANGUAGE plpgsql VOLATILE {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        new_seq bigint;
        logged text := public.agentdesk_origin(origin);
    BEGIN
        INSERT INTO public.change_log AS c (at, origin, entity, op, entity_id, parents, revision)
            VALUES (at, logged, entity, op, entity_id, parents, revision)
            RETURNING c.seq INTO new_seq;
        RETURN json_build_object('seq', new_seq, 'at', at, 'origin', logged, 'entity', entity,
                                 'op', op, 'id', entity_id, 'parents', parents::json, 'revision', revision);
    END $$
    """,
    # A unit of work's change rows (a JSON array of {at, entity, op, entity_id, parents, revision}), in order.
    f"""
    CREATE FUNCTION public.agentdesk_log_changes(given_origin text, changes json)
    RETURNS TABLE (seq bigint, origin text)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    DECLARE
        logged text := public.agentdesk_origin(given_origin);
    BEGIN
        PERFORM public.agentdesk_require_writer('writing the change log');
        IF json_typeof(changes) IS DISTINCT FROM 'array' THEN
            RAISE EXCEPTION 'the changes must be a JSON array' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM public.agentdesk_writer_turn(false);
        RETURN QUERY WITH ins AS (
            INSERT INTO public.change_log AS c (at, origin, entity, op, entity_id, parents, revision)
            SELECT (e.v ->> 'at')::float8, logged, e.v ->> 'entity', e.v ->> 'op', e.v ->> 'entity_id',
                   coalesce(e.v ->> 'parents', '{{}}'), (e.v ->> 'revision')::int
            FROM json_array_elements(changes) WITH ORDINALITY AS e(v, n) ORDER BY e.n
            RETURNING c.seq)
            SELECT ins.seq::bigint, logged FROM ins ORDER BY ins.seq;
    END $$
    """,
    "REVOKE ALL ON FUNCTION public.agentdesk_log_changes(text, json) FROM PUBLIC",
    # Every group may call them; they refuse a viewer themselves, in one sentence (a login with CREATEROLE
    # writes the audit record of a role grant).
    f"GRANT EXECUTE ON FUNCTION public.agentdesk_log_changes(text, json) TO {GROUPS}",
    "REVOKE ALL ON FUNCTION public.agentdesk_writer_turn(boolean) FROM PUBLIC",
    f"GRANT EXECUTE ON FUNCTION public.agentdesk_writer_turn(boolean) TO {GROUPS}",
]

AUDIT = [
    # Which audit records a caller may append by hand; NULL when it may, else the level it would need.
    f"""
    CREATE FUNCTION public.agentdesk_audit_needs(action text, entity text, entity_id text) RETURNS text
    LANGUAGE plpgsql STABLE {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        lvl text := public.agentdesk_level();
    BEGIN
        IF lvl = 'owner' THEN
            RETURN NULL;
        END IF;
        IF action IN ('project.create', 'task.create', 'session.create', 'agent.create', 'run.start')
           OR action ~ '^(session|run|otel)\\.[a-z_]+$' THEN
            RETURN CASE WHEN lvl = 'agent' THEN NULL ELSE 'agent' END;
        END IF;
        IF action = 'approval.request' AND entity = 'approval' THEN
            IF lvl = 'agent' AND EXISTS (SELECT 1 FROM public.approvals p WHERE p.id = entity_id
                                         AND p.requested_login = session_user AND p.status = 'pending')
               AND NOT EXISTS (SELECT 1 FROM public.audit_log a WHERE a.entity = 'approval'
                               AND a.entity_id = entity_id AND a.action = 'approval.request') THEN
                RETURN NULL;
            END IF;
            RETURN 'agent (for its own new request)';
        END IF;
        IF action ~ '^role\\.' AND entity = 'role' THEN
            IF lvl = 'admin' OR coalesce((SELECT r.rolcreaterole FROM pg_roles r WHERE r.rolname = session_user),
                                         false) THEN
                RETURN NULL;
            END IF;
            RETURN 'admin';
        END IF;
        IF action IN ('agent_token.create', 'agent_token.revoke') AND entity = 'agent_token' THEN
            RETURN CASE WHEN lvl IN ('operator', 'admin') THEN NULL ELSE 'operator' END;
        END IF;
        IF (action IN ('rule.create', 'rule.update', 'rule.remove') AND entity = 'rule')
           OR action = 'changelog.prune' THEN
            RETURN CASE WHEN lvl = 'admin' THEN NULL ELSE 'admin' END;
        END IF;
        RETURN 'agentdesk''s own functions';
    END $$
    """,
]


def _audit_wrapper() -> str:
    return f"""
    CREATE OR REPLACE FUNCTION public.agentdesk_audit_append(at_text text, actor text, action text, entity text,
                                                             entity_id text, payload text)
    RETURNS TABLE (seq bigint, hash text, mac text, anchor_mac text)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        needs text := public.agentdesk_audit_needs(action, entity, entity_id);
    BEGIN
        IF needs IS NOT NULL THEN
            PERFORM public.agentdesk_refuse(format('an audit record %L', action), needs);
        END IF;
        RETURN QUERY SELECT * FROM public.agentdesk_audit_write(at_text, actor, action, entity, entity_id, payload);
    END $$
    """


APPROVALS = [
    # Below the owner an approval is requested pending, under the server's payload hash and the caller's login.
    f"""
    CREATE FUNCTION public.agentdesk_approval_inserted() RETURNS trigger LANGUAGE plpgsql {SAFE} AS $$
    BEGIN
        IF public.agentdesk_is_owner(current_user) THEN
            NEW.requested_login := session_user;
            NEW.decided_login := CASE WHEN NEW.status <> 'pending' THEN session_user END;
            RETURN NEW;
        END IF;
        IF NEW.status IS DISTINCT FROM 'pending' OR NEW.decided_at IS NOT NULL OR NEW.decided_by IS NOT NULL
           OR NEW.decided_by_rule IS NOT NULL OR NEW.reason IS NOT NULL OR NEW.edited_arguments IS NOT NULL
           OR NEW.edited_hash IS NOT NULL OR NEW.approved_hash IS NOT NULL THEN
            PERFORM public.agentdesk_refuse('recording an approval as decided', 'operator (through agentdesk_decide)');
        END IF;
        IF NEW.payload_hash IS DISTINCT FROM 'sha256:' || encode(sha256(convert_to(
                NEW.tool_name || E'\\n' || NEW.arguments, 'UTF8')), 'hex') THEN
            RAISE EXCEPTION 'the approval''s payload hash is not the hash of its tool and arguments'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        NEW.requested_login := session_user;
        NEW.decided_login := NULL;
        NEW.revision := 1;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER approvals_requested BEFORE INSERT ON public.approvals
        FOR EACH ROW EXECUTE FUNCTION public.agentdesk_approval_inserted()
    """,
    # Who asked never changes; who decided is whoever's transaction took it off pending; a decision is final.
    f"""
    CREATE FUNCTION public.agentdesk_approval_updated() RETURNS trigger LANGUAGE plpgsql {SAFE} AS $$
    BEGIN
        NEW.requested_login := OLD.requested_login;
        IF OLD.status = 'pending' AND NEW.status IS DISTINCT FROM 'pending' THEN
            NEW.decided_login := session_user;
            RETURN NEW;
        END IF;
        NEW.decided_login := OLD.decided_login;
        IF OLD.status <> 'pending' AND (NEW.status, NEW.decided_at, NEW.decided_by, NEW.decided_by_rule, NEW.reason,
                                        NEW.edited_arguments, NEW.edited_hash, NEW.approved_hash, NEW.arguments,
                                        NEW.tool_name, NEW.payload_hash)
               IS DISTINCT FROM (OLD.status, OLD.decided_at, OLD.decided_by, OLD.decided_by_rule, OLD.reason,
                                 OLD.edited_arguments, OLD.edited_hash, OLD.approved_hash, OLD.arguments,
                                 OLD.tool_name, OLD.payload_hash) THEN
            RAISE EXCEPTION 'approval % is already %: a decision is final', OLD.id, OLD.status
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER approvals_decided BEFORE UPDATE ON public.approvals
        FOR EACH ROW EXECUTE FUNCTION public.agentdesk_approval_updated()
    """,
    # An agent appends context: new items, their first revision; it never covers, summarises or revises.
    f"""
    CREATE FUNCTION public.agentdesk_context_appended() RETURNS trigger LANGUAGE plpgsql {SAFE} AS $$
    BEGIN
        IF public.agentdesk_is_owner(current_user) THEN
            RETURN NEW;
        END IF;
        -- NEW's fields are read only under the table that has them (PL/pgSQL does not short-circuit AND)
        IF TG_TABLE_NAME = 'context_items' THEN
            IF NEW.compaction_id IS NOT NULL OR NEW.summary_of IS NOT NULL OR NEW.removed THEN
                PERFORM public.agentdesk_refuse('covering or removing context', 'operator (through the functions)');
            END IF;
        ELSIF EXISTS (SELECT 1 FROM public.context_item_revisions r WHERE r.item_id = NEW.item_id) THEN
            PERFORM public.agentdesk_refuse('revising a context item', 'operator (through agentdesk_edit_item)');
        END IF;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER context_items_appended BEFORE INSERT ON public.context_items
        FOR EACH ROW EXECUTE FUNCTION public.agentdesk_context_appended()
    """,
    """
    CREATE TRIGGER context_item_revisions_appended BEFORE INSERT ON public.context_item_revisions
        FOR EACH ROW EXECUTE FUNCTION public.agentdesk_context_appended()
    """,
    # An agent re-homes an item to the real agent when a trace arrives (UPDATE agent_id, its only grant), but
    # only an item nobody has touched since it was appended: an operator's edit, lock, hide or compaction stays.
    f"""
    CREATE FUNCTION public.agentdesk_context_rehomed() RETURNS trigger LANGUAGE plpgsql {SAFE} AS $$
    BEGIN
        IF public.agentdesk_is_owner(current_user) THEN
            RETURN NEW;
        END IF;
        IF OLD.revision <> 1 OR OLD.locked OR NOT OLD.visible OR OLD.removed OR OLD.compaction_id IS NOT NULL
           OR OLD.summary_of IS NOT NULL THEN
            PERFORM public.agentdesk_refuse('moving a context item an operator has changed',
                                            'operator (through the functions)');
        END IF;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER context_items_rehomed BEFORE UPDATE ON public.context_items
        FOR EACH ROW EXECUTE FUNCTION public.agentdesk_context_rehomed()
    """,
    # The requester's heartbeat (its own requests only), logged like the Python path logs it.
    f"""
    CREATE FUNCTION public.agentdesk_beat(approval_id text, origin text) RETURNS json
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        a public.approvals;
        now_at float8;
    BEGIN
        PERFORM public.agentdesk_require_requester(approval_id, 'beating for a request');
        PERFORM public.agentdesk_writer_turn(false);
        now_at := public.agentdesk_now();
        UPDATE public.approvals p SET requester_heartbeat_at = now_at WHERE p.id = approval_id
            AND p.status = 'pending' RETURNING * INTO a;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        RETURN public.agentdesk_change(now_at, origin, 'approval', 'heartbeat', a.id,
                                       public.agentdesk_approval_parents(a), a.revision);
    END $$
    """,
    "REVOKE ALL ON FUNCTION public.agentdesk_beat(text, text) FROM PUBLIC",
    "GRANT EXECUTE ON FUNCTION public.agentdesk_beat(text, text) TO agentdesk_agent, agentdesk_operator",
    # The runtime's deletes (an OTLP trace's staging rows, resolved orphans, a placeholder agent nothing uses).
    f"""
    CREATE FUNCTION public.agentdesk_runtime_delete(what text, run_id text, ids text[]) RETURNS int
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        gone int;
    BEGIN
        PERFORM public.agentdesk_require('agent', 'deleting runtime rows');
        IF what = 'staging of others' THEN
            DELETE FROM public.import_staging s WHERE s.entity_id = ANY (ids) AND s.run_id <> run_id
                AND s.kind <> 'run';
        ELSIF what = 'staging' THEN
            DELETE FROM public.import_staging s WHERE s.run_id = run_id;
        ELSIF what = 'orphans' THEN
            DELETE FROM public.otel_orphans o WHERE o.span_id = ANY (ids);
        ELSIF what = 'placeholder agent' THEN
            DELETE FROM public.agents g WHERE g.id = ANY (ids)
                AND NOT EXISTS (SELECT 1 FROM public.runs r WHERE r.agent_id = g.id)
                AND NOT EXISTS (SELECT 1 FROM public.approvals p WHERE p.agent_id = g.id)
                AND NOT EXISTS (SELECT 1 FROM public.context_items c WHERE c.agent_id = g.id)
                AND NOT EXISTS (SELECT 1 FROM public.context_groups c WHERE c.agent_id = g.id)
                AND NOT EXISTS (SELECT 1 FROM public.agents c WHERE c.parent_agent_id = g.id);
        ELSE
            RAISE EXCEPTION 'unknown runtime delete %', what USING ERRCODE = 'invalid_parameter_value';
        END IF;
        GET DIAGNOSTICS gone = ROW_COUNT;
        RETURN gone;
    END $$
    """,
    "REVOKE ALL ON FUNCTION public.agentdesk_runtime_delete(text, text, text[]) FROM PUBLIC",
    "GRANT EXECUTE ON FUNCTION public.agentdesk_runtime_delete(text, text, text[]) TO agentdesk_agent",
]

OWN_DECISIONS = [
    # An agent reads its own requests and their decisions, not other agents': row-level security on approvals.
    # Everyone in agentdesk_viewer (viewers, operators, admins) reads every row; the owner is not bound by it,
    # so agentdesk's SECURITY DEFINER functions see every row too.
    "ALTER TABLE public.approvals ENABLE ROW LEVEL SECURITY",
    "CREATE POLICY approvals_read ON public.approvals FOR SELECT "
    "USING (requested_login = session_user OR pg_has_role(session_user, 'agentdesk_viewer', 'MEMBER'))",
    "CREATE POLICY approvals_request ON public.approvals FOR INSERT WITH CHECK (true)",
    "CREATE POLICY approvals_rehome ON public.approvals FOR UPDATE USING (requested_login = session_user) "
    "WITH CHECK (requested_login = session_user)",
]

RULES = [
    # A rule change (anything but the hit count) is an admin's and bumps the revision by exactly one.
    f"""
    CREATE FUNCTION public.agentdesk_rule_changed() RETURNS trigger LANGUAGE plpgsql {SAFE} AS $$
    BEGIN
        IF TG_OP = 'UPDATE' AND (to_jsonb(NEW) - 'hit_count' - 'last_hit_at')
                                = (to_jsonb(OLD) - 'hit_count' - 'last_hit_at') THEN
            RETURN NEW;  -- a hit: counted by the deciding transaction
        END IF;
        PERFORM public.agentdesk_require('admin', 'changing a rule');
        IF TG_OP = 'UPDATE' AND NEW.revision IS DISTINCT FROM OLD.revision + 1 THEN
            RAISE EXCEPTION 'a rule change must bump the revision by one (% to %)', OLD.revision, NEW.revision
                USING ERRCODE = 'check_violation';
        END IF;
        IF TG_OP = 'INSERT' AND NEW.revision IS DISTINCT FROM 1 THEN
            RAISE EXCEPTION 'a new rule starts at revision 1' USING ERRCODE = 'check_violation';
        END IF;
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END $$
    """,
    """
    CREATE TRIGGER approval_rules_changed BEFORE INSERT OR UPDATE OR DELETE ON public.approval_rules
        FOR EACH ROW EXECUTE FUNCTION public.agentdesk_rule_changed()
    """,
    # At commit: every rule this transaction created, changed or removed has its audit record in it.
    f"""
    CREATE FUNCTION public.agentdesk_rule_audited() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER {SAFE} AS $$
    DECLARE
        rule_id text := CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END;
        wanted text := CASE TG_OP WHEN 'INSERT' THEN 'rule.create' WHEN 'UPDATE' THEN 'rule.update'
                                  ELSE 'rule.remove' END;
    BEGIN
        IF TG_OP = 'UPDATE' AND (to_jsonb(NEW) - 'hit_count' - 'last_hit_at')
                                = (to_jsonb(OLD) - 'hit_count' - 'last_hit_at') THEN
            RETURN NULL;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM public.audit_log a WHERE a.entity = 'rule' AND a.entity_id = rule_id
                       AND a.action = wanted AND a.xmin = pg_current_xact_id()::xid) THEN
            RAISE EXCEPTION 'rule % was changed without its % audit record; nothing was written', rule_id, wanted
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN NULL;
    END $$
    """,
    """
    CREATE CONSTRAINT TRIGGER approval_rules_audited AFTER INSERT OR UPDATE OR DELETE ON public.approval_rules
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.agentdesk_rule_audited()
    """,
]

REQUESTER_FUNCTIONS = {
    # 0008's functions an agent may call too, and the check that replaces their operator check.
    "agentdesk_withdraw": ("PERFORM public.agentdesk_require('operator');",
                           "PERFORM public.agentdesk_require_requester(approval_id, 'withdrawing a request');"),
    "agentdesk_expire_overdue": ("PERFORM public.agentdesk_require('operator');",
                                 "PERFORM public.agentdesk_require_writer('expiring overdue approvals');"),
}
DOING = {
    "agentdesk_decide": "deciding", "agentdesk_dismiss_gone": "dismissing requests",
    "agentdesk_set_item_locked": "locking context", "agentdesk_edit_item": "editing context",
    "agentdesk_set_group_visibility": "showing or hiding context", "agentdesk_compact": "compacting context",
    "agentdesk_undo_compaction": "undoing a compaction",
}

CALLER_HELPERS = ("agentdesk_is_owner()", "agentdesk_is_owner(name)", "agentdesk_level()",
                  "agentdesk_refuse(text, text)", "agentdesk_require(text, text)", "agentdesk_origin(text)",
                  "agentdesk_approval_inserted()", "agentdesk_approval_updated()", "agentdesk_context_appended()",
                  "agentdesk_context_rehomed()", "agentdesk_rule_changed()")
INTERNAL = (*CALLER_HELPERS, "agentdesk_require_writer(text)", "agentdesk_require_requester(text, text)",
            "agentdesk_audit_needs(text, text, text)", "agentdesk_rule_audited()")
"""Functions nobody calls by name: REVOKEd from PUBLIC (the caller helpers then granted to the groups)."""

DOWNGRADE = [
    "DROP TRIGGER IF EXISTS approval_rules_audited ON public.approval_rules",
    "DROP TRIGGER IF EXISTS approval_rules_changed ON public.approval_rules",
    "DROP FUNCTION IF EXISTS public.agentdesk_rule_audited()",
    "DROP FUNCTION IF EXISTS public.agentdesk_rule_changed()",
    "DROP FUNCTION IF EXISTS public.agentdesk_runtime_delete(text, text, text[])",
    "DROP FUNCTION IF EXISTS public.agentdesk_beat(text, text)",
    "DROP TRIGGER IF EXISTS context_item_revisions_appended ON public.context_item_revisions",
    "DROP TRIGGER IF EXISTS context_items_appended ON public.context_items",
    "DROP TRIGGER IF EXISTS context_items_rehomed ON public.context_items",
    "DROP FUNCTION IF EXISTS public.agentdesk_context_rehomed()",
    "DROP FUNCTION IF EXISTS public.agentdesk_context_appended()",
    "DROP POLICY IF EXISTS approvals_read ON public.approvals",
    "DROP POLICY IF EXISTS approvals_request ON public.approvals",
    "DROP POLICY IF EXISTS approvals_rehome ON public.approvals",
    "ALTER TABLE public.approvals DISABLE ROW LEVEL SECURITY",
    "DROP TRIGGER IF EXISTS approvals_decided ON public.approvals",
    "DROP TRIGGER IF EXISTS approvals_requested ON public.approvals",
    "DROP FUNCTION IF EXISTS public.agentdesk_approval_updated()",
    "DROP FUNCTION IF EXISTS public.agentdesk_approval_inserted()",
    "DROP FUNCTION IF EXISTS public.agentdesk_log_changes(text, json)",
    "DROP FUNCTION IF EXISTS public.agentdesk_presence_leave()",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON public.presence TO agentdesk_viewer",
    # 0005's and 0008's grants, as they were
    "GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO agentdesk_operator",
    "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO agentdesk_operator",
    "REVOKE UPDATE, DELETE, TRUNCATE, INSERT ON public.audit_log FROM agentdesk_operator",
    "REVOKE INSERT, DELETE ON public.approval_rules FROM agentdesk_operator",
    "REVOKE DELETE ON public.change_log FROM agentdesk_operator",
    "REVOKE INSERT, UPDATE, DELETE ON public.alembic_version, public.agentdesk_meta FROM agentdesk_operator",
    "REVOKE ALL ON public.agentdesk_audit_key FROM agentdesk_operator",
    "REVOKE UPDATE ON public.approvals FROM agentdesk_operator",
    "GRANT UPDATE (requester_heartbeat_at, agent_id, revision) ON public.approvals TO agentdesk_operator",
    "REVOKE UPDATE, DELETE ON public.context_items, public.context_item_revisions FROM agentdesk_operator",
    "GRANT UPDATE (agent_id) ON public.context_items TO agentdesk_operator",
    "REVOKE INSERT, UPDATE, DELETE ON public.compactions FROM agentdesk_operator",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT INSERT, UPDATE, DELETE ON TABLES TO agentdesk_operator",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO agentdesk_operator",
    "REVOKE ALL ON ALL TABLES IN SCHEMA public FROM agentdesk_agent",
    "REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM agentdesk_agent",
    "REVOKE ALL ON SCHEMA public FROM agentdesk_agent",
]


def _functions(bind: sa.Connection, where: str) -> list[tuple[str, str]]:
    """(name, CREATE OR REPLACE text) of the store's functions matching `where` (on pg_proc p)."""
    rows = bind.exec_driver_sql(
        "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        f"WHERE n.nspname = 'public' AND p.proname LIKE 'agentdesk\\_%%' AND {where} ORDER BY p.proname").all()
    return [(str(name), str(text)) for name, text in rows]


def _run(bind: sa.Connection, statement: str) -> None:
    """One statement through the driver, no parameters: function bodies hold % and : that must stay as written."""
    cursor = bind.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(statement)
    finally:
        cursor.close()


def _patch(bind: sa.Connection, name: str, pairs: list[tuple[str, str]]) -> None:
    for proname, text in _functions(bind, f"p.proname = '{name}'"):
        changed = text
        for old, new in pairs:
            changed = changed.replace(old, new)
        if changed != text:
            _run(bind, changed)
        assert proname == name


def upgrade() -> None:
    with op.batch_alter_table('approvals', schema=None) as batch_op:
        batch_op.add_column(sa.Column('requested_login', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('decided_login', sa.Text(), nullable=True))
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for statement in [*ROLE, *WIDTHS, *PRIVILEGES, *HELPERS, *PRESENCE, *QUEUE, *CHANGES]:
        _run(bind, statement)
    # The audit: 0008's appender becomes the internal agentdesk_audit_write (no check: its callers checked);
    # agentdesk_audit_append checks what the caller may record, then calls it.
    [(_, appender)] = _functions(bind, "p.proname = 'agentdesk_audit_append'")
    internal = appender.replace("FUNCTION public.agentdesk_audit_append(", "FUNCTION public.agentdesk_audit_write(")
    internal = internal.replace("IF NOT pg_has_role(session_user, 'agentdesk_operator', 'MEMBER') THEN",
                                "IF false THEN")
    _run(bind, internal.replace(OLD_LOCK, NEW_LOCK))
    _run(bind, "REVOKE ALL ON FUNCTION public.agentdesk_audit_write(text, text, text, text, text, text) "
               f"FROM PUBLIC, {GROUPS}")
    for statement in [*AUDIT, _audit_wrapper(), *APPROVALS, *OWN_DECISIONS, *RULES]:
        _run(bind, statement)
    _run(bind, "GRANT EXECUTE ON FUNCTION public.agentdesk_audit_append(text, text, text, text, text, text) "
               "TO agentdesk_agent")
    # Every function that took the advisory lock or appended through agentdesk_audit_append: the turn and the
    # internal appender instead; the operator checks say what the caller is and what it would need.
    for name, _ in _functions(bind, "(p.prosrc LIKE '%%pg_advisory_xact_lock%%' OR "
                                    "(p.prosrc LIKE '%%agentdesk_audit_append(%%' "
                                    "AND p.proname <> 'agentdesk_audit_append'))"):
        pairs = [(OLD_LOCK, NEW_LOCK), ("public.agentdesk_audit_append(", "public.agentdesk_audit_write(")]
        if name in REQUESTER_FUNCTIONS:
            pairs.append(REQUESTER_FUNCTIONS[name])
        if name in DOING:
            pairs.append(("public.agentdesk_require('operator');",
                          f"public.agentdesk_require('operator', '{DOING[name]}');"))
        _patch(bind, name, pairs)
    # The head's anchor MAC signs only what the table holds: every writer anchors what its functions appended.
    _patch(bind, "agentdesk_audit_head", [("PERFORM public.agentdesk_require('operator');",
                                           "PERFORM public.agentdesk_require_writer('anchoring the audit');")])
    for function in ("agentdesk_withdraw(text, text, text, text)", "agentdesk_expire_overdue(text, text)",
                     "agentdesk_audit_head()"):
        _run(bind, f"GRANT EXECUTE ON FUNCTION public.{function} TO agentdesk_agent")
    for internal_function in INTERNAL:
        _run(bind, f"REVOKE ALL ON FUNCTION public.{internal_function} FROM PUBLIC")
    # the triggers' and checks' helpers run as the caller: every group needs them (they reveal nothing)
    for helper in CALLER_HELPERS:
        _run(bind, f"GRANT EXECUTE ON FUNCTION public.{helper} TO {GROUPS}")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        for name, _ in _functions(bind, "p.prosrc LIKE '%%agentdesk_writer_turn(false)%%' OR "
                                        "p.prosrc LIKE '%%agentdesk_audit_write(%%'"):
            if name == "agentdesk_audit_write":
                continue
            pairs = [(NEW_LOCK, OLD_LOCK), ("public.agentdesk_audit_write(", "public.agentdesk_audit_append(")]
            if name in REQUESTER_FUNCTIONS:
                pairs.append(REQUESTER_FUNCTIONS[name][::-1])
            if name in DOING:
                pairs.append((f"public.agentdesk_require('operator', '{DOING[name]}');",
                              "public.agentdesk_require('operator');"))
            _patch(bind, name, pairs)
        _patch(bind, "agentdesk_audit_head", [("PERFORM public.agentdesk_require_writer('anchoring the audit');",
                                               "PERFORM public.agentdesk_require('operator');")])
        [(_, internal)] = _functions(bind, "p.proname = 'agentdesk_audit_write'")
        appender = internal.replace("FUNCTION public.agentdesk_audit_write(", "FUNCTION public.agentdesk_audit_append(")
        appender = appender.replace("IF false THEN",
                                    "IF NOT pg_has_role(session_user, 'agentdesk_operator', 'MEMBER') THEN")
        _run(bind, appender.replace(NEW_LOCK, OLD_LOCK))
        _run(bind, "DROP FUNCTION public.agentdesk_audit_write(text, text, text, text, text, text)")
        _run(bind, """
            CREATE OR REPLACE FUNCTION public.agentdesk_change(at float8, origin text, entity text, op text,
                                                               entity_id text, parents text, revision int)
            RETURNS json LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
            #variable_conflict use_variable
            DECLARE
                new_seq bigint;
            BEGIN
                INSERT INTO public.change_log AS c (at, origin, entity, op, entity_id, parents, revision)
                    VALUES (at, coalesce(origin, 'sql'), entity, op, entity_id, parents, revision)
                    RETURNING c.seq INTO new_seq;
                RETURN json_build_object('seq', new_seq, 'at', at, 'origin', coalesce(origin, 'sql'),
                                         'entity', entity, 'op', op, 'id', entity_id, 'parents', parents::json,
                                         'revision', revision);
            END $$
        """)
        _run(bind, """
            CREATE OR REPLACE FUNCTION public.agentdesk_require(level text) RETURNS void LANGUAGE plpgsql STABLE
            SET search_path = pg_catalog, pg_temp AS $$
            BEGIN
                IF NOT pg_has_role(session_user, 'agentdesk_' || level, 'MEMBER') THEN
                    RAISE EXCEPTION 'permission denied: login % is not an agentdesk %', session_user, level
                        USING ERRCODE = 'insufficient_privilege';
                END IF;
            END $$
        """)
        for statement in DOWNGRADE:
            _run(bind, statement)
        for function in ("agentdesk_writer_turn(boolean)", "agentdesk_audit_needs(text, text, text)",
                         "agentdesk_require_requester(text, text)", "agentdesk_require_writer(text)",
                         "agentdesk_require(text, text)", "agentdesk_refuse(text, text)", "agentdesk_origin(text)",
                         "agentdesk_level()", "agentdesk_is_owner()", "agentdesk_is_owner(name)"):
            _run(bind, f"DROP FUNCTION IF EXISTS public.{function}")
        _run(bind, "DROP TABLE IF EXISTS public.agentdesk_writer_queue, public.agentdesk_runtime_queue")
        _run(bind, "ALTER TABLE public.change_log ALTER COLUMN origin TYPE varchar(64) USING left(origin, 64)")
        # seq columns stay bigint: narrowing could fail on a store past 2^31, and nothing needs them narrow
    with op.batch_alter_table('approvals', schema=None) as batch_op:
        batch_op.drop_column('decided_login')
        batch_op.drop_column('requested_login')
