-- public.agentdesk_audit_anchors_ok(seqs bigint[], hashes text[], macs text[]): the body head (0014_anchor_location) defines, as pg_get_functiondef prints it.
CREATE OR REPLACE FUNCTION public.agentdesk_audit_anchors_ok(seqs bigint[], hashes text[], macs text[])
 RETURNS boolean[]
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    END $function$;
REVOKE ALL ON FUNCTION public.agentdesk_audit_anchors_ok(seqs bigint[], hashes text[], macs text[]) FROM PUBLIC, agentdesk_viewer, agentdesk_operator, agentdesk_admin, agentdesk_agent;
GRANT EXECUTE ON FUNCTION public.agentdesk_audit_anchors_ok(seqs bigint[], hashes text[], macs text[]) TO agentdesk_viewer;
