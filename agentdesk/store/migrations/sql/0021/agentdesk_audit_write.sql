-- public.agentdesk_audit_write(at_text text, actor text, action text, entity text, entity_id text, payload text): the body head (0014_anchor_location) defines, as pg_get_functiondef prints it.
CREATE OR REPLACE FUNCTION public.agentdesk_audit_write(at_text text, actor text, action text, entity text, entity_id text, payload text)
 RETURNS TABLE(seq bigint, hash text, mac text, anchor_mac text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
        IF false THEN
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
        PERFORM public.agentdesk_writer_turn(false);
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
    END $function$;
REVOKE ALL ON FUNCTION public.agentdesk_audit_write(at_text text, actor text, action text, entity text, entity_id text, payload text) FROM PUBLIC, agentdesk_viewer, agentdesk_operator, agentdesk_admin, agentdesk_agent;
