-- Migration 0008_pg_functions as it was finally committed (74b1842), for a database that ran its first version
-- (3892fd8): that one made only the audit functions, so 0012_least_privilege, which grants and rewrites the
-- decision and context functions, cannot run on it. Run by migrations/repairs.py before 0012, only on such a
-- database; the audit key (agentdesk_audit_key and its row) is kept, everything else is made as the final 0008
-- makes it. Statements end with a line holding only ';'. Never edit: this file is part of revision
-- 0021_pg_functions_refresh.

DROP FUNCTION IF EXISTS public.agentdesk_audit_macs_ok(text[], text[])
;

CREATE OR REPLACE FUNCTION public.agentdesk_json(value text) RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
        SELECT coalesce(to_json(value)::text, 'null')
    $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_py_float(value float8) RETURNS text LANGUAGE sql IMMUTABLE STRICT
    SET search_path = pg_catalog, pg_temp SET extra_float_digits = 1 AS $$
        SELECT CASE WHEN t ~ '^-?[0-9]+$' THEN t || '.0' ELSE t END FROM (SELECT value::text AS t) s
    $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_hmac(inner_pad bytea, outer_pad bytea, message text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
        SELECT encode(sha256(outer_pad || sha256(inner_pad || convert_to(message, 'UTF8'))), 'hex')
    $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_hmac_pad(secret bytea, byte int) RETURNS bytea
    LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
        k bytea := CASE WHEN length(secret) > 64 THEN sha256(secret) ELSE secret END;
    BEGIN
        k := k || decode(repeat('00', 64 - length(k)), 'hex');
        FOR i IN 0..63 LOOP
            k := set_byte(k, i, get_byte(k, i) # byte);
        END LOOP;
        RETURN k;
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_record_hash(prev_hash text, at_text text, actor text, action text,
                                                 entity text, entity_id text, payload text) RETURNS text
    LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
        SELECT encode(sha256(convert_to('[' || public.agentdesk_json(prev_hash) || ','
            || public.agentdesk_json(at_text) || ',' || public.agentdesk_json(actor) || ','
            || public.agentdesk_json(action) || ',' || public.agentdesk_json(entity) || ','
            || public.agentdesk_json(entity_id) || ',' || public.agentdesk_json(payload) || ']', 'UTF8')), 'hex')
    $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_require(level text) RETURNS void LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
        IF NOT pg_has_role(session_user, 'agentdesk_' || level, 'MEMBER') THEN
            RAISE EXCEPTION 'permission denied: login % is not an agentdesk %', session_user, level
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_audit_append(at_text text, actor text, action text, entity text,
                                                  entity_id text, payload text)
    RETURNS TABLE (seq bigint, hash text, mac text, anchor_mac text)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
        PERFORM pg_advisory_xact_lock(1634170673);
        SELECT * INTO k FROM public.agentdesk_audit_key WHERE id = 1;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'the store has no audit key (agentdesk_audit_key is empty); nothing was written'
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        SELECT a.hash INTO tail FROM public.audit_log a ORDER BY a.seq DESC LIMIT 1;
        tail := coalesce(tail, repeat('0', 64));
        digest := public.agentdesk_record_hash(tail, at_text, actor, action, entity, entity_id, payload);
        -- Two MACs, each truncated to 128 bits (RFC 2104 allows half) so both fit the 64-character column:
        -- the record's hash, then the hash with the login (session_user, which a SECURITY DEFINER function
        -- does not change), so a db_login changed afterwards is told apart from a re-hashed record.
        signature := left(public.agentdesk_hmac(k.inner_pad, k.outer_pad, 'agentdesk-audit-record:' || digest), 32)
            || left(public.agentdesk_hmac(k.inner_pad, k.outer_pad,
                                          'agentdesk-audit-login:' || digest || ':' || session_user), 32);
        INSERT INTO public.audit_log AS a (at, actor, action, entity, entity_id, payload, prev_hash, hash, mac,
                                           db_login)
            VALUES (at_value, actor, action, entity, entity_id, payload, tail, digest, signature, session_user)
            RETURNING a.seq INTO new_seq;
        SELECT m.value INTO store FROM public.agentdesk_meta m WHERE m.key = 'store_id';
        RETURN QUERY SELECT new_seq, digest, signature, public.agentdesk_hmac(
            k.inner_pad, k.outer_pad, 'agentdesk-audit-anchor:' || coalesce(store, '') || ':' || new_seq
            || ':' || digest);
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_audit_macs_ok(hashes text[], macs text[], logins text[]) RETURNS text[]
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
        k public.agentdesk_audit_key;
    BEGIN
        IF NOT pg_has_role(session_user, 'agentdesk_viewer', 'MEMBER') THEN
            RAISE EXCEPTION 'permission denied: login % is not an agentdesk viewer', session_user
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        SELECT * INTO k FROM public.agentdesk_audit_key WHERE id = 1;
        RETURN ARRAY(
            -- agentdesk_hmac written out: a function with SET clauses is not inlined, and verify asks per record
            SELECT CASE
                WHEN p.m IS NULL OR length(p.m) <> 64 OR left(p.m, 32) IS DISTINCT FROM left(encode(sha256(
                    k.outer_pad || sha256(k.inner_pad || convert_to('agentdesk-audit-record:' || p.h, 'UTF8'))),
                    'hex'), 32) THEN 'record'
                WHEN p.l IS NULL OR right(p.m, 32) IS DISTINCT FROM left(encode(sha256(k.outer_pad || sha256(
                    k.inner_pad || convert_to('agentdesk-audit-login:' || p.h || ':' || p.l, 'UTF8'))), 'hex'), 32)
                    THEN 'login'
                ELSE 'ok' END
            FROM unnest(hashes, macs, logins) WITH ORDINALITY AS p(h, m, l, n) ORDER BY p.n);
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_audit_anchors_ok(seqs bigint[], hashes text[], macs text[])
    RETURNS boolean[] LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DECLARE
        k public.agentdesk_audit_key;
        store text;
    BEGIN
        PERFORM public.agentdesk_require('viewer');
        SELECT * INTO k FROM public.agentdesk_audit_key WHERE id = 1;
        SELECT m.value INTO store FROM public.agentdesk_meta m WHERE m.key = 'store_id';
        RETURN ARRAY(
            SELECT coalesce(p.m = encode(sha256(k.outer_pad || sha256(k.inner_pad || convert_to(
                                'agentdesk-audit-anchor:' || coalesce(store, '') || ':' || p.s || ':' || p.h,
                                'UTF8'))), 'hex'), false)
            FROM unnest(seqs, hashes, macs) WITH ORDINALITY AS p(s, h, m, n) ORDER BY p.n);
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_audit_head() RETURNS TABLE (seq bigint, hash text, anchor_mac text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    #variable_conflict use_variable
    DECLARE
        k public.agentdesk_audit_key;
        store text;
    BEGIN
        PERFORM public.agentdesk_require('operator');
        SELECT * INTO k FROM public.agentdesk_audit_key WHERE id = 1;
        SELECT m.value INTO store FROM public.agentdesk_meta m WHERE m.key = 'store_id';
        RETURN QUERY SELECT a.seq::bigint, a.hash::text, public.agentdesk_hmac(k.inner_pad, k.outer_pad,
            'agentdesk-audit-anchor:' || coalesce(store, '') || ':' || a.seq || ':' || a.hash)
            FROM public.audit_log a ORDER BY a.seq DESC LIMIT 1;
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_audit_key_info() RETURNS TABLE (keyed_from bigint, created_at float8)
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        SELECT k.keyed_from, k.created_at FROM public.agentdesk_audit_key k
        WHERE k.id = 1 AND pg_has_role(session_user, 'agentdesk_viewer', 'MEMBER')
    $$
;

REVOKE ALL ON FUNCTION public.agentdesk_audit_append(text, text, text, text, text, text) FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_audit_macs_ok(text[], text[], text[]) FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_audit_anchors_ok(bigint[], text[], text[]) FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_audit_key_info() FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_audit_head() FROM PUBLIC
;

GRANT EXECUTE ON FUNCTION public.agentdesk_audit_head() TO agentdesk_operator
;

GRANT EXECUTE ON FUNCTION public.agentdesk_audit_append(text, text, text, text, text, text) TO agentdesk_operator
;

GRANT EXECUTE ON FUNCTION public.agentdesk_audit_macs_ok(text[], text[], text[]) TO agentdesk_viewer
;

GRANT EXECUTE ON FUNCTION public.agentdesk_audit_anchors_ok(bigint[], text[], text[]) TO agentdesk_viewer
;

GRANT EXECUTE ON FUNCTION public.agentdesk_audit_key_info() TO agentdesk_viewer
;

REVOKE INSERT ON public.audit_log FROM agentdesk_operator, agentdesk_admin
;

CREATE OR REPLACE FUNCTION public.agentdesk_now() RETURNS float8 LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
        SELECT extract(epoch FROM clock_timestamp())::float8
    $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_change(at float8, origin text, entity text, op text, entity_id text,
                                            parents text, revision int) RETURNS json
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    #variable_conflict use_variable
    DECLARE
        new_seq bigint;
    BEGIN
        INSERT INTO public.change_log AS c (at, origin, entity, op, entity_id, parents, revision)
            VALUES (at, coalesce(origin, 'sql'), entity, op, entity_id, parents, revision)
            RETURNING c.seq INTO new_seq;
        RETURN json_build_object('seq', new_seq, 'at', at, 'origin', coalesce(origin, 'sql'), 'entity', entity,
                                 'op', op, 'id', entity_id, 'parents', parents::json, 'revision', revision);
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_approval_parents(a public.approvals) RETURNS text
    LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
        SELECT json_build_object('project', a.project_id, 'task', a.task_id, 'session', a.session_id,
                                 'agent', a.agent_id, 'run', a.run_id)::text
    $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_close_approval(a public.approvals, now_at float8, new_status text,
                                                    actor text, action text, payload text, origin text)
    RETURNS json LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
        IF a.tool_call_id IS NOT NULL THEN
            UPDATE public.tool_calls t SET status = new_status WHERE t.id = a.tool_call_id;
        END IF;
        PERFORM public.agentdesk_audit_append(public.agentdesk_py_float(now_at), actor, action, 'approval',
                                              a.id, payload);
        RETURN public.agentdesk_change(now_at, origin, 'approval', 'update', a.id,
                                       public.agentdesk_approval_parents(a), a.revision + 1);
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_decide(approval_id text, approve boolean, actor text, reason text,
                                            edited_arguments text, expected_hash text, origin text)
    RETURNS TABLE (outcome text, status text, decided_by text, decided_at float8, expires_at float8,
                   shown_hash text, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    #variable_conflict use_variable
    DECLARE
        a public.approvals;
        now_at float8;
        shown text;
        edited_hash text;
        new_status text := CASE WHEN approve THEN 'approved' ELSE 'denied' END;
        change json;
    BEGIN
        PERFORM public.agentdesk_require('operator');
        IF approve IS NULL OR actor IS NULL OR actor = '' THEN
            RAISE EXCEPTION 'a decision needs approve (true or false) and an actor'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT approve AND (reason IS NULL OR btrim(reason) = '') THEN
            RAISE EXCEPTION 'a denial needs a reason' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT approve AND edited_arguments IS NOT NULL THEN
            RAISE EXCEPTION 'arguments can only be edited when approving' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF edited_arguments IS NOT NULL AND json_typeof(edited_arguments::json) <> 'object' THEN
            RAISE EXCEPTION 'edited arguments must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM pg_advisory_xact_lock(1634170673);
        now_at := public.agentdesk_now();
        SELECT * INTO a FROM public.approvals p WHERE p.id = approval_id FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::text, NULL::text, NULL::float8, NULL::float8, NULL::text,
                                NULL::json;
            RETURN;
        END IF;
        shown := 'sha256:' || encode(sha256(convert_to(a.arguments, 'UTF8')), 'hex');
        IF expected_hash IS NOT NULL AND NOT starts_with(substr(shown, 8), lower(expected_hash)) THEN
            RETURN QUERY SELECT 'stale'::text, a.status::text, a.decided_by::text, a.decided_at, a.expires_at,
                                shown, NULL::json;
            RETURN;
        END IF;
        IF a.status <> 'pending' OR (a.expires_at IS NOT NULL AND a.expires_at <= now_at) THEN
            RETURN QUERY SELECT 'lost'::text, a.status::text, a.decided_by::text, a.decided_at, a.expires_at,
                                shown, NULL::json;
            RETURN;
        END IF;
        IF edited_arguments IS NOT NULL THEN
            edited_hash := 'sha256:' || encode(sha256(convert_to(a.tool_name || E'\n' || edited_arguments,
                                                                  'UTF8')), 'hex');
        END IF;
        UPDATE public.approvals p SET status = new_status, decided_at = now_at, decided_by = actor,
            reason = agentdesk_decide.reason, edited_arguments = agentdesk_decide.edited_arguments,
            edited_hash = edited_hash, approved_hash = shown, revision = a.revision + 1
            WHERE p.id = approval_id;
        change := public.agentdesk_close_approval(a, now_at, new_status, actor, 'approval.' || new_status,
            '{"edited_arguments":' || public.agentdesk_json(edited_arguments)
            || ',"edited_hash":' || public.agentdesk_json(edited_hash)
            || ',"original_arguments":' || public.agentdesk_json(a.arguments)
            || ',"payload_hash":' || public.agentdesk_json(a.payload_hash)
            || ',"reason":' || public.agentdesk_json(reason)
            || ',"shown_arguments_hash":' || public.agentdesk_json(shown)
            || ',"tool":' || public.agentdesk_json(a.tool_name) || '}', origin);
        RETURN QUERY SELECT 'ok'::text, new_status, actor, now_at, a.expires_at, shown, json_build_array(change);
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_withdraw(approval_id text, actor text, reason text, origin text)
    RETURNS TABLE (outcome text, status text, decided_by text, decided_at float8, expires_at float8,
                   changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    #variable_conflict use_variable
    DECLARE
        a public.approvals;
        now_at float8;
        change json;
    BEGIN
        PERFORM public.agentdesk_require('operator');
        IF actor IS NULL OR actor = '' THEN
            RAISE EXCEPTION 'withdrawing needs an actor' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM pg_advisory_xact_lock(1634170673);
        now_at := public.agentdesk_now();
        SELECT * INTO a FROM public.approvals p WHERE p.id = approval_id FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::text, NULL::text, NULL::float8, NULL::float8, NULL::json;
            RETURN;
        END IF;
        IF a.status <> 'pending' THEN
            RETURN QUERY SELECT 'lost'::text, a.status::text, a.decided_by::text, a.decided_at, a.expires_at,
                                NULL::json;
            RETURN;
        END IF;
        UPDATE public.approvals p SET status = 'withdrawn', decided_at = now_at, decided_by = actor,
            reason = agentdesk_withdraw.reason, revision = a.revision + 1 WHERE p.id = approval_id;
        change := public.agentdesk_close_approval(a, now_at, 'withdrawn', actor, 'approval.withdrawn',
            '{"payload_hash":' || public.agentdesk_json(a.payload_hash) || ',"reason":'
            || public.agentdesk_json(reason) || ',"tool":' || public.agentdesk_json(a.tool_name) || '}', origin);
        RETURN QUERY SELECT 'ok'::text, 'withdrawn'::text, actor, now_at, a.expires_at, json_build_array(change);
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_expire_overdue(actor text, origin text)
    RETURNS TABLE (approval_id text, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    #variable_conflict use_variable
    DECLARE
        a public.approvals;
        now_at float8;
    BEGIN
        PERFORM public.agentdesk_require('operator');
        PERFORM pg_advisory_xact_lock(1634170673);
        now_at := public.agentdesk_now();
        FOR a IN SELECT * FROM public.approvals p WHERE p.status = 'pending' AND p.expires_at IS NOT NULL
                 AND p.expires_at <= now_at ORDER BY p.created_at, p.id FOR UPDATE LOOP
            UPDATE public.approvals p SET status = 'expired', decided_at = now_at, revision = a.revision + 1
                WHERE p.id = a.id;
            PERFORM public.agentdesk_audit_append(public.agentdesk_py_float(now_at), coalesce(actor, 'agentdesk'),
                'approval.expired', 'approval', a.id,
                '{"expires_at":' || public.agentdesk_py_float(a.expires_at) || '}');
            RETURN QUERY SELECT a.id::text, json_build_array(public.agentdesk_change(
                now_at, origin, 'approval', 'update', a.id, public.agentdesk_approval_parents(a), a.revision + 1));
        END LOOP;
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_dismiss_gone(actor text, approval_ids text[], gone_after_s float8,
                                                  reason text, origin text)
    RETURNS TABLE (approval_id text, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    #variable_conflict use_variable
    DECLARE
        a public.approvals;
        now_at float8;
        cutoff float8;
    BEGIN
        PERFORM public.agentdesk_require('operator');
        IF actor IS NULL OR actor = '' OR gone_after_s IS NULL OR reason IS NULL THEN
            RAISE EXCEPTION 'dismissing needs an actor, a reason and how long a requester may be silent'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM pg_advisory_xact_lock(1634170673);
        now_at := public.agentdesk_now();
        cutoff := now_at - gone_after_s;
        FOR a IN SELECT * FROM public.approvals p WHERE p.status = 'pending'
                 AND p.requester_heartbeat_at IS NOT NULL AND p.requester_heartbeat_at < cutoff
                 AND (approval_ids IS NULL OR p.id = ANY (approval_ids)) ORDER BY p.created_at, p.id FOR UPDATE LOOP
            UPDATE public.approvals p SET status = 'denied', decided_at = now_at, decided_by = actor,
                reason = agentdesk_dismiss_gone.reason, revision = a.revision + 1 WHERE p.id = a.id;
            RETURN QUERY SELECT a.id::text, json_build_array(public.agentdesk_close_approval(
                a, now_at, 'denied', actor, 'approval.denied',
                '{"payload_hash":' || public.agentdesk_json(a.payload_hash) || ',"reason":'
                || public.agentdesk_json(reason) || ',"requester_heartbeat_at":'
                || coalesce(public.agentdesk_py_float(a.requester_heartbeat_at), 'null')
                || ',"tool":' || public.agentdesk_json(a.tool_name) || '}', origin));
        END LOOP;
    END $$
;

REVOKE ALL ON FUNCTION public.agentdesk_decide(text, boolean, text, text, text, text, text) FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_withdraw(text, text, text, text) FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_expire_overdue(text, text) FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_dismiss_gone(text, text[], float8, text, text) FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_change(float8, text, text, text, text, text, int) FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_close_approval(public.approvals, float8, text, text, text, text, text) FROM PUBLIC
;

GRANT EXECUTE ON FUNCTION public.agentdesk_decide(text, boolean, text, text, text, text, text) TO agentdesk_operator
;

GRANT EXECUTE ON FUNCTION public.agentdesk_withdraw(text, text, text, text) TO agentdesk_operator
;

GRANT EXECUTE ON FUNCTION public.agentdesk_expire_overdue(text, text) TO agentdesk_operator
;

GRANT EXECUTE ON FUNCTION public.agentdesk_dismiss_gone(text, text[], float8, text, text) TO agentdesk_operator
;

REVOKE UPDATE ON public.approvals FROM agentdesk_operator, agentdesk_admin
;

GRANT UPDATE (requester_heartbeat_at, agent_id, revision) ON public.approvals TO agentdesk_operator
;

CREATE OR REPLACE FUNCTION public.agentdesk_item_revised(item_id text, now_at float8, origin text) RETURNS json
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    #variable_conflict use_variable
    DECLARE
        i public.context_items;
    BEGIN
        UPDATE public.context_items c SET revision = c.revision + 1 WHERE c.id = item_id RETURNING * INTO i;
        INSERT INTO public.context_item_revisions (item_id, revision, content, token_estimate, created_at)
            VALUES (i.id, i.revision, i.content, i.token_estimate, now_at);
        RETURN public.agentdesk_change(now_at, origin, 'context_item', 'update', i.id,
                                       json_build_object('agent', i.agent_id, 'group', i.group_id)::text, i.revision);
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_group_touched(group_id text, now_at float8, origin text) RETURNS json
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    #variable_conflict use_variable
    DECLARE
        g public.context_groups;
    BEGIN
        UPDATE public.context_groups c SET revision = c.revision + 1 WHERE c.id = group_id RETURNING * INTO g;
        RETURN public.agentdesk_change(now_at, origin, 'context_group', 'update', g.id,
                                       json_build_object('agent', g.agent_id)::text, g.revision);
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_context_bumped(agent_id text, now_at float8, origin text) RETURNS json
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    #variable_conflict use_variable
    DECLARE
        a public.agents;
    BEGIN
        UPDATE public.agents c SET context_revision = c.context_revision + 1 WHERE c.id = agent_id
            RETURNING * INTO a;
        RETURN public.agentdesk_change(now_at, origin, 'context', 'update', a.id,
                                       json_build_object('agent', a.id, 'session', a.session_id)::text,
                                       a.context_revision);
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_tokens(content text) RETURNS int LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
        SELECT CASE WHEN content = '' THEN 0 ELSE greatest(1, ceil(length(content) / 4.0))::int END
    $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_set_item_locked(item_id text, locked boolean, expected_revision int,
                                                     actor text, origin text)
    RETURNS TABLE (outcome text, revision int, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    #variable_conflict use_variable
    DECLARE
        i public.context_items;
        now_at float8;
        done json[];
    BEGIN
        PERFORM public.agentdesk_require('operator');
        IF locked IS NULL OR expected_revision IS NULL OR actor IS NULL OR actor = '' THEN
            RAISE EXCEPTION 'locking needs locked, the expected revision and an actor'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM pg_advisory_xact_lock(1634170673);
        now_at := public.agentdesk_now();
        SELECT * INTO i FROM public.context_items c WHERE c.id = item_id AND NOT c.removed FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::int, NULL::json;
            RETURN;
        END IF;
        IF i.revision <> expected_revision THEN
            RETURN QUERY SELECT 'stale'::text, i.revision, NULL::json;
            RETURN;
        END IF;
        IF i.compaction_id IS NOT NULL THEN
            RETURN QUERY SELECT 'covered'::text, i.revision, NULL::json;
            RETURN;
        END IF;
        UPDATE public.context_items c SET locked = agentdesk_set_item_locked.locked WHERE c.id = item_id;
        done := ARRAY[public.agentdesk_item_revised(item_id, now_at, origin),
                      public.agentdesk_group_touched(i.group_id, now_at, origin),
                      public.agentdesk_context_bumped(i.agent_id, now_at, origin)];
        PERFORM public.agentdesk_audit_append(public.agentdesk_py_float(now_at), actor,
            CASE WHEN locked THEN 'context.lock' ELSE 'context.unlock' END, 'context_item', item_id, '{}');
        RETURN QUERY SELECT 'ok'::text, i.revision + 1, array_to_json(done);
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_edit_item(item_id text, content text, expected_revision int, actor text,
                                               origin text)
    RETURNS TABLE (outcome text, revision int, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    #variable_conflict use_variable
    DECLARE
        i public.context_items;
        now_at float8;
        done json[];
        after_tokens int := public.agentdesk_tokens(content);
    BEGIN
        PERFORM public.agentdesk_require('operator');
        IF content IS NULL OR expected_revision IS NULL OR actor IS NULL OR actor = '' THEN
            RAISE EXCEPTION 'editing needs the content, the expected revision and an actor'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM pg_advisory_xact_lock(1634170673);
        now_at := public.agentdesk_now();
        SELECT * INTO i FROM public.context_items c WHERE c.id = item_id AND NOT c.removed FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::int, NULL::json;
            RETURN;
        END IF;
        IF i.revision <> expected_revision THEN
            RETURN QUERY SELECT 'stale'::text, i.revision, NULL::json;
            RETURN;
        END IF;
        IF i.locked THEN
            RETURN QUERY SELECT 'locked'::text, i.revision, NULL::json;
            RETURN;
        END IF;
        IF i.compaction_id IS NOT NULL THEN
            RETURN QUERY SELECT 'covered'::text, i.revision, NULL::json;
            RETURN;
        END IF;
        UPDATE public.context_items c SET content = agentdesk_edit_item.content, token_estimate = after_tokens
            WHERE c.id = item_id;
        done := ARRAY[public.agentdesk_item_revised(item_id, now_at, origin),
                      public.agentdesk_group_touched(i.group_id, now_at, origin),
                      public.agentdesk_context_bumped(i.agent_id, now_at, origin)];
        PERFORM public.agentdesk_audit_append(public.agentdesk_py_float(now_at), actor, 'context.edit',
            'context_item', item_id,
            '{"after_hash":' || public.agentdesk_json('sha256:' || encode(sha256(convert_to(content, 'UTF8')), 'hex'))
            || ',"after_tokens":' || after_tokens || ',"before_revision":' || expected_revision
            || ',"before_tokens":' || public.agentdesk_tokens(i.content) || '}');
        RETURN QUERY SELECT 'ok'::text, i.revision + 1, array_to_json(done);
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_set_group_visibility(group_id text, visible boolean, expected_revision int,
                                                          actor text, origin text)
    RETURNS TABLE (outcome text, revision int, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    #variable_conflict use_variable
    DECLARE
        g public.context_groups;
        now_at float8;
        done json[] := ARRAY[]::json[];
        changed text[];
    BEGIN
        PERFORM public.agentdesk_require('operator');
        IF visible IS NULL OR expected_revision IS NULL OR actor IS NULL OR actor = '' THEN
            RAISE EXCEPTION 'showing or hiding needs visible, the expected revision and an actor'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM pg_advisory_xact_lock(1634170673);
        now_at := public.agentdesk_now();
        SELECT * INTO g FROM public.context_groups c WHERE c.id = group_id FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::int, NULL::json;
            RETURN;
        END IF;
        IF g.revision <> expected_revision THEN
            RETURN QUERY SELECT 'stale'::text, g.revision, NULL::json;
            RETURN;
        END IF;
        IF EXISTS (SELECT 1 FROM public.context_items c WHERE c.group_id = g.id AND NOT c.removed
                   AND c.compaction_id IS NOT NULL) THEN
            RETURN QUERY SELECT 'covered'::text, g.revision, NULL::json;
            RETURN;
        END IF;
        IF NOT visible AND EXISTS (SELECT 1 FROM public.context_items c WHERE c.group_id = g.id AND NOT c.removed
                                   AND c.locked) THEN
            RETURN QUERY SELECT 'locked'::text, g.revision, NULL::json;
            RETURN;
        END IF;
        changed := ARRAY(SELECT c.id::text FROM public.context_items c WHERE c.group_id = g.id AND NOT c.removed
                         AND c.visible IS DISTINCT FROM visible ORDER BY c.position, c.id);
        UPDATE public.context_items c SET visible = agentdesk_set_group_visibility.visible
            WHERE c.id = ANY (changed);
        SELECT coalesce(array_agg(public.agentdesk_item_revised(x.id, now_at, origin) ORDER BY x.n), done)
            INTO done FROM unnest(changed) WITH ORDINALITY AS x(id, n);
        done := done || public.agentdesk_group_touched(g.id, now_at, origin)
                     || public.agentdesk_context_bumped(g.agent_id, now_at, origin);
        PERFORM public.agentdesk_audit_append(public.agentdesk_py_float(now_at), actor,
            CASE WHEN visible THEN 'context.show' ELSE 'context.hide' END, 'context_group', g.id,
            '{"items":[' || coalesce((SELECT string_agg(public.agentdesk_json(x.id), ',' ORDER BY x.n)
                                       FROM unnest(changed) WITH ORDINALITY AS x(id, n)), '') || ']}');
        RETURN QUERY SELECT 'ok'::text, g.revision + 1, array_to_json(done);
    END $$
;

REVOKE ALL ON FUNCTION public.agentdesk_set_item_locked(text, boolean, int, text, text) FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_edit_item(text, text, int, text, text) FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_set_group_visibility(text, boolean, int, text, text) FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_item_revised(text, float8, text) FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_group_touched(text, float8, text) FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_context_bumped(text, float8, text) FROM PUBLIC
;

GRANT EXECUTE ON FUNCTION public.agentdesk_set_item_locked(text, boolean, int, text, text) TO agentdesk_operator
;

GRANT EXECUTE ON FUNCTION public.agentdesk_edit_item(text, text, int, text, text) TO agentdesk_operator
;

GRANT EXECUTE ON FUNCTION public.agentdesk_set_group_visibility(text, boolean, int, text, text) TO agentdesk_operator
;

REVOKE UPDATE, DELETE ON public.context_items, public.context_item_revisions FROM agentdesk_operator, agentdesk_admin
;

GRANT UPDATE (agent_id) ON public.context_items TO agentdesk_operator
;

CREATE OR REPLACE FUNCTION public.agentdesk_compact(agent_id text, item_ids text[], summary text, focus text,
                                             expected_revision int, actor text, comp_id text, group_id text,
                                             summary_id text, origin text)
    RETURNS TABLE (outcome text, revision int, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    #variable_conflict use_variable
    DECLARE
        a public.agents;
        now_at float8;
        done json[] := ARRAY[]::json[];
        chosen public.context_items[];
        first_rn bigint;
        last_rn bigint;
        wanted int := cardinality(ARRAY(SELECT DISTINCT unnest(item_ids)));
        tokens int := public.agentdesk_tokens(summary);
        covered text[];
    BEGIN
        PERFORM public.agentdesk_require('operator');
        IF summary IS NULL OR btrim(summary) = '' OR focus IS NULL OR expected_revision IS NULL OR actor IS NULL
           OR actor = '' OR comp_id IS NULL OR group_id IS NULL OR summary_id IS NULL THEN
            RAISE EXCEPTION 'compacting needs a summary, a focus, the expected revision, an actor and the new ids'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM pg_advisory_xact_lock(1634170673);
        now_at := public.agentdesk_now();
        SELECT * INTO a FROM public.agents g WHERE g.id = agent_id FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::int, NULL::json;
            RETURN;
        END IF;
        IF a.context_revision <> expected_revision THEN
            RETURN QUERY SELECT 'stale'::text, a.context_revision, NULL::json;
            RETURN;
        END IF;
        IF coalesce(wanted, 0) = 0 THEN
            RETURN QUERY SELECT 'nothing chosen'::text, a.context_revision, NULL::json;
            RETURN;
        END IF;
        -- the agent's current context in the order the window lists it (store/commands.py `compact`)
        SELECT array_agg(l.i ORDER BY l.rn), min(l.rn), max(l.rn) INTO chosen, first_rn, last_rn FROM (
            SELECT c AS i, row_number() OVER (ORDER BY c.position, c.summary_of IS NULL, c.created_at) AS rn
            FROM public.context_items c WHERE c.agent_id = a.id AND NOT c.removed AND c.compaction_id IS NULL
        ) l WHERE (l.i).id = ANY (item_ids);
        IF coalesce(cardinality(chosen), 0) <> wanted THEN
            RETURN QUERY SELECT 'not listed'::text, a.context_revision, NULL::json;
            RETURN;
        END IF;
        IF last_rn - first_rn + 1 <> wanted THEN
            RETURN QUERY SELECT 'not consecutive'::text, a.context_revision, NULL::json;
            RETURN;
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(chosen) x WHERE NOT x.visible) THEN
            RETURN QUERY SELECT 'hidden'::text, a.context_revision, NULL::json;
            RETURN;
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(chosen) x WHERE x.locked) THEN
            RETURN QUERY SELECT 'locked'::text, a.context_revision, NULL::json;
            RETURN;
        END IF;
        covered := ARRAY(SELECT x.id::text FROM unnest(chosen) WITH ORDINALITY AS x ORDER BY ordinality);
        INSERT INTO public.context_groups (id, agent_id, kind, revision, ordinal, created_at)
            VALUES (group_id, a.id, 'compaction', 1,
                    coalesce((SELECT g.ordinal FROM public.context_groups g WHERE g.id = (chosen[1]).group_id), 0),
                    now_at);
        INSERT INTO public.context_items (id, agent_id, group_id, position, kind, role, content, visible, locked,
                                          revision, token_estimate, summary_of, removed, created_at)
            VALUES (summary_id, a.id, group_id, (chosen[1]).position, 'compaction', 'system', summary, true, false,
                    1, tokens, comp_id, false, now_at);
        INSERT INTO public.context_item_revisions (item_id, revision, content, token_estimate, created_at)
            VALUES (summary_id, 1, summary, tokens, now_at);
        INSERT INTO public.compactions (id, agent_id, summary_item_id, covered_item_ids, focus, source_revision,
                                        created_at, created_by)
            VALUES (comp_id, a.id, summary_id, '[' || array_to_string(ARRAY(
                        SELECT public.agentdesk_json(o.x) FROM unnest(covered) WITH ORDINALITY AS o(x, n)
                        ORDER BY o.n), ', ') || ']',
                    focus, expected_revision, now_at, actor);
        UPDATE public.context_items c SET compaction_id = comp_id WHERE c.id = ANY (covered);
        SELECT coalesce(array_agg(public.agentdesk_change(now_at, origin, 'context_item', 'update', x.id,
                                  json_build_object('agent', a.id, 'group', x.group_id)::text, x.revision)
                                  ORDER BY x.ordinality), done)
            INTO done FROM unnest(chosen) WITH ORDINALITY AS x;
        done := done || public.agentdesk_change(now_at, origin, 'context_item', 'insert', summary_id,
                                                json_build_object('agent', a.id, 'group', group_id)::text, 1)
                     || public.agentdesk_change(now_at, origin, 'compaction', 'insert', comp_id,
                                                json_build_object('agent', a.id)::text, 1)
                     || public.agentdesk_context_bumped(a.id, now_at, origin);
        PERFORM public.agentdesk_audit_append(public.agentdesk_py_float(now_at), actor, 'context.compact',
            'compaction', comp_id,
            '{"covered":[' || array_to_string(ARRAY(SELECT public.agentdesk_json(o.x) FROM unnest(covered)
                                                         WITH ORDINALITY AS o(x, n) ORDER BY o.n), ',')
            || '],"focus":' || public.agentdesk_json(focus) || ',"source_revision":' || expected_revision
            || ',"tokens_after":' || tokens || ',"tokens_before":'
            || (SELECT coalesce(sum(x.token_estimate), 0) FROM unnest(chosen) x) || '}');
        RETURN QUERY SELECT 'ok'::text, a.context_revision + 1, array_to_json(done);
    END $$
;

CREATE OR REPLACE FUNCTION public.agentdesk_undo_compaction(compaction_id text, actor text, origin text)
    RETURNS TABLE (outcome text, revision int, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    #variable_conflict use_variable
    DECLARE
        k public.compactions;
        s public.context_items;
        now_at float8;
        done json[] := ARRAY[]::json[];
        restored text[];
    BEGIN
        PERFORM public.agentdesk_require('operator');
        IF actor IS NULL OR actor = '' THEN
            RAISE EXCEPTION 'undoing a compaction needs an actor' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM pg_advisory_xact_lock(1634170673);
        now_at := public.agentdesk_now();
        SELECT * INTO k FROM public.compactions c WHERE c.id = compaction_id FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::int, NULL::json;
            RETURN;
        END IF;
        SELECT * INTO s FROM public.context_items c WHERE c.id = k.summary_item_id;
        IF FOUND AND s.compaction_id IS NOT NULL THEN
            RETURN QUERY SELECT 'summary covered'::text, NULL::int, NULL::json;
            RETURN;
        END IF;
        IF k.undone_at IS NOT NULL THEN
            RETURN QUERY SELECT 'already undone'::text, NULL::int, NULL::json;
            RETURN;
        END IF;
        UPDATE public.compactions c SET undone_at = now_at WHERE c.id = k.id;
        restored := ARRAY(SELECT c.id::text FROM public.context_items c WHERE c.compaction_id = k.id
                          ORDER BY c.position, c.id);
        UPDATE public.context_items c SET compaction_id = NULL WHERE c.id = ANY (restored);
        SELECT coalesce(array_agg(public.agentdesk_change(now_at, origin, 'context_item', 'update', c.id,
                                  json_build_object('agent', k.agent_id, 'group', c.group_id)::text, c.revision)
                                  ORDER BY c.position, c.id), done)
            INTO done FROM public.context_items c WHERE c.id = ANY (restored);
        IF s.id IS NOT NULL THEN
            UPDATE public.context_items c SET removed = true WHERE c.id = s.id;
            done := done || public.agentdesk_change(now_at, origin, 'context_item', 'delete', s.id,
                                                    json_build_object('agent', k.agent_id, 'group', s.group_id)::text,
                                                    NULL);
        END IF;
        done := done || public.agentdesk_change(now_at, origin, 'compaction', 'update', k.id,
                                                json_build_object('agent', k.agent_id)::text, NULL)
                     || public.agentdesk_context_bumped(k.agent_id, now_at, origin);
        PERFORM public.agentdesk_audit_append(public.agentdesk_py_float(now_at), actor, 'context.uncompact',
            'compaction', k.id, '{"restored":[' || array_to_string(ARRAY(
                SELECT public.agentdesk_json(o.x) FROM unnest(restored) WITH ORDINALITY AS o(x, n) ORDER BY o.n), ',')
            || ']}');
        RETURN QUERY SELECT 'ok'::text, NULL::int, array_to_json(done);
    END $$
;

REVOKE ALL ON FUNCTION public.agentdesk_compact(text, text[], text, text, int, text, text, text, text, text) FROM PUBLIC
;

REVOKE ALL ON FUNCTION public.agentdesk_undo_compaction(text, text, text) FROM PUBLIC
;

GRANT EXECUTE ON FUNCTION public.agentdesk_compact(text, text[], text, text, int, text, text, text, text, text) TO agentdesk_operator
;

GRANT EXECUTE ON FUNCTION public.agentdesk_undo_compaction(text, text, text) TO agentdesk_operator
;

REVOKE INSERT, UPDATE, DELETE ON public.compactions FROM agentdesk_operator, agentdesk_admin
;
