-- public.agentdesk_audit_macs_ok(hashes text[], macs text[], logins text[]): the body head (0014_anchor_location) defines, as pg_get_functiondef prints it.
CREATE OR REPLACE FUNCTION public.agentdesk_audit_macs_ok(hashes text[], macs text[], logins text[])
 RETURNS text[]
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    END $function$;
REVOKE ALL ON FUNCTION public.agentdesk_audit_macs_ok(hashes text[], macs text[], logins text[]) FROM PUBLIC, agentdesk_viewer, agentdesk_operator, agentdesk_admin, agentdesk_agent;
GRANT EXECUTE ON FUNCTION public.agentdesk_audit_macs_ok(hashes text[], macs text[], logins text[]) TO agentdesk_viewer;
