"""rule applier: standing rules decide agent logins' requests on PostgreSQL, applied by an operator's process

Revision ID: 0024_rule_applier
Revises: 0023_integer_nanoseconds
Create Date: 2026-12-06 10:00:00

Until now an agent login's approval request on PostgreSQL was never decided by a standing rule: the agent's
own process would have matched the rules, and it could lie, so every such request went to a person. A rule
is now applied by a party the agent cannot impersonate: an operator's (or admin's) process, the window or
`agentdesk rules apply`, matching with the same matcher the runtime uses and writing through these functions.

Both backends: the `approval_rule_looks` table, one row per request an applier has looked at: when, by which
login, the rule that decided (or asked) and the outcome (approved, denied, ask, none). A request with no row is
one no applier has looked at yet; on SQLite no applier runs (rules are applied as each request is made) and
the table stays empty.

PostgreSQL only:

- Nobody writes `approval_rule_looks` directly: every group may SELECT it, none INSERT, UPDATE, DELETE,
  TRUNCATE or LOCK it.
- `agentdesk_rules_decide(approval_id, rule_id, rule_revision, expected_hash, origin)`: decide a pending,
  unexpired request by the rule the caller matched, under the writers' turn, compare-and-set on the pending
  state. The server checks what it can without the matcher (the rule is still at that revision, enabled,
  unexpired, allow or deny, for this tool and place) and takes the effect from the rule row, not the caller;
  who decided is `rules (applied by <session_user>)`, the deciding rule `decided_by_rule`, the reason
  "<effect> rule <id>: <note>". Audited as `approval.approved` / `approval.denied` (with the rule, its revision
  and matcher, the applier's login and the shown arguments' hash), the rule's hit counted, change-logged.
  The outcome, with the same columns as `agentdesk_decide`'s: 'ok', 'not found', 'stale' (the arguments are
  not the ones matched), 'lost' (decided or expired first: who and when), 'rule changed'.
  EXECUTE: operators (so admins). An agent, whose request it is, may not call it.
- `agentdesk_rules_looked(approval_id, rule_id, origin)`: record that an applier looked at a pending request
  and no rule decided it (rule_id: the ask rule that matched, else NULL): it waits for a person. Once per
  request (a second look, by a racing applier, writes nothing: 'seen'); audited `approval.rules_looked`,
  change-logged as an approval update. EXECUTE: operators.

The SQL is written out here, not imported, so the revision stays what it was when later code changes.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0024_rule_applier'
down_revision = '0023_integer_nanoseconds'
branch_labels = None
depends_on = None

SAFE = "SET search_path = pg_catalog, pg_temp"
GROUPS = "agentdesk_viewer, agentdesk_operator, agentdesk_admin, agentdesk_agent"
NOTHING = "NULL::text, NULL::text, NULL::float8, NULL::float8, NULL::text, NULL::json"

FUNCTIONS = [
    f"""
    CREATE FUNCTION public.agentdesk_rules_decide(approval_id text, rule_id text, rule_revision int,
                                                  expected_hash text, origin text)
    RETURNS TABLE (outcome text, status text, decided_by text, decided_at float8, expires_at float8,
                   shown_hash text, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        a public.approvals;
        r public.approval_rules;
        now_at float8;
        shown text;
        new_status text;
        who text := 'rules (applied by ' || session_user || ')';
        why text;
        change json;
        hit json;
    BEGIN
        PERFORM public.agentdesk_require('operator', 'applying standing rules');
        PERFORM public.agentdesk_writer_turn(false);
        now_at := public.agentdesk_now();
        SELECT * INTO a FROM public.approvals p WHERE p.id = approval_id FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, {NOTHING};
            RETURN;
        END IF;
        shown := 'sha256:' || encode(sha256(convert_to(a.arguments, 'UTF8')), 'hex');
        IF expected_hash IS NULL OR NOT starts_with(substr(shown, 8), lower(expected_hash)) THEN
            RETURN QUERY SELECT 'stale'::text, a.status::text, a.decided_by::text, a.decided_at, a.expires_at,
                                shown, NULL::json;
            RETURN;
        END IF;
        IF a.status <> 'pending' OR (a.expires_at IS NOT NULL AND a.expires_at <= now_at) THEN
            RETURN QUERY SELECT 'lost'::text, a.status::text, a.decided_by::text, a.decided_at, a.expires_at,
                                shown, NULL::json;
            RETURN;
        END IF;
        SELECT * INTO r FROM public.approval_rules x WHERE x.id = rule_id FOR SHARE;
        IF NOT FOUND OR r.revision IS DISTINCT FROM rule_revision OR NOT r.enabled
           OR (r.expires_at IS NOT NULL AND r.expires_at <= now_at) OR r.effect NOT IN ('allow', 'deny')
           OR r.tool NOT IN (a.tool_name, '*') OR (r.project_id IS NOT NULL AND r.project_id <> a.project_id)
           OR (r.agent_id IS NOT NULL AND r.agent_id <> a.agent_id)
           OR (r.session_id IS NOT NULL AND r.session_id <> a.session_id) THEN
            RETURN QUERY SELECT 'rule changed'::text, a.status::text, a.decided_by::text, a.decided_at,
                                a.expires_at, shown, NULL::json;
            RETURN;
        END IF;
        new_status := CASE r.effect WHEN 'allow' THEN 'approved' ELSE 'denied' END;
        why := r.effect || ' rule ' || r.id || CASE WHEN r.note <> '' THEN ': ' || r.note ELSE '' END;
        UPDATE public.approvals p SET status = new_status, decided_at = now_at, decided_by = who,
            decided_by_rule = r.id, reason = why, approved_hash = shown, revision = a.revision + 1
            WHERE p.id = approval_id;
        UPDATE public.approval_rules x SET hit_count = x.hit_count + 1, last_hit_at = now_at WHERE x.id = r.id;
        INSERT INTO public.approval_rule_looks AS k (approval_id, looked_at, looked_login, rule_id, outcome)
            VALUES (approval_id, now_at, session_user, r.id, new_status)
            ON CONFLICT ON CONSTRAINT approval_rule_looks_pkey DO UPDATE SET looked_at = now_at,
                looked_login = session_user, rule_id = r.id, outcome = new_status;
        change := public.agentdesk_close_approval(a, now_at, new_status, who, 'approval.' || new_status,
            '{{"applied_by":' || public.agentdesk_json(session_user::text)
            || ',"payload_hash":' || public.agentdesk_json(a.payload_hash)
            || ',"reason":' || public.agentdesk_json(why)
            || ',"rule_effect":' || public.agentdesk_json(r.effect)
            || ',"rule_id":' || public.agentdesk_json(r.id)
            || ',"rule_matcher":' || public.agentdesk_json(r.matcher)
            || ',"rule_revision":' || r.revision::text
            || ',"shown_arguments_hash":' || public.agentdesk_json(shown)
            || ',"tool":' || public.agentdesk_json(a.tool_name) || '}}', origin);
        hit := public.agentdesk_change(now_at, origin, 'rule', 'update', r.id, '{{}}', r.revision);
        RETURN QUERY SELECT 'ok'::text, new_status, who, now_at, a.expires_at, shown, json_build_array(change, hit);
    END $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_rules_looked(approval_id text, rule_id text, origin text)
    RETURNS TABLE (outcome text, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        a public.approvals;
        now_at float8;
        seen text;
        who text := 'rules (applied by ' || session_user || ')';
        what text := CASE WHEN rule_id IS NULL THEN 'none' ELSE 'ask' END;
    BEGIN
        PERFORM public.agentdesk_require('operator', 'applying standing rules');
        PERFORM public.agentdesk_writer_turn(false);
        now_at := public.agentdesk_now();
        SELECT * INTO a FROM public.approvals p WHERE p.id = approval_id;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::json;
            RETURN;
        END IF;
        IF a.status <> 'pending' THEN
            RETURN QUERY SELECT 'lost'::text, NULL::json;
            RETURN;
        END IF;
        INSERT INTO public.approval_rule_looks AS k (approval_id, looked_at, looked_login, rule_id, outcome)
            VALUES (approval_id, now_at, session_user, rule_id, what)
            ON CONFLICT ON CONSTRAINT approval_rule_looks_pkey DO NOTHING
            RETURNING k.approval_id INTO seen;
        IF seen IS NULL THEN
            RETURN QUERY SELECT 'seen'::text, NULL::json;
            RETURN;
        END IF;
        PERFORM public.agentdesk_audit_write(public.agentdesk_py_float(now_at), who, 'approval.rules_looked',
            'approval', a.id, '{{"applied_by":' || public.agentdesk_json(session_user::text)
            || ',"outcome":' || public.agentdesk_json(what) || ',"rule_id":' || public.agentdesk_json(rule_id)
            || '}}');
        RETURN QUERY SELECT 'ok'::text, json_build_array(public.agentdesk_change(now_at, origin, 'approval',
            'update', a.id, public.agentdesk_approval_parents(a), a.revision));
    END $$
    """,
    "REVOKE ALL ON FUNCTION public.agentdesk_rules_decide(text, text, int, text, text) FROM PUBLIC",
    "REVOKE ALL ON FUNCTION public.agentdesk_rules_looked(text, text, text) FROM PUBLIC",
    "GRANT EXECUTE ON FUNCTION public.agentdesk_rules_decide(text, text, int, text, text) TO agentdesk_operator",
    "GRANT EXECUTE ON FUNCTION public.agentdesk_rules_looked(text, text, text) TO agentdesk_operator",
]

GRANTS = [
    f"REVOKE ALL ON public.approval_rule_looks FROM PUBLIC, {GROUPS}",
    f"GRANT SELECT ON public.approval_rule_looks TO {GROUPS}",
]


def _run(bind: sa.Connection, statement: str) -> None:
    """One statement through the driver, no parameters: function bodies hold % and : that must stay as written."""
    cursor = bind.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(statement)
    finally:
        cursor.close()


def upgrade() -> None:
    op.create_table(
        "approval_rule_looks",
        sa.Column("approval_id", sa.String(length=64), sa.ForeignKey("approvals.id"), nullable=False),
        sa.Column("looked_at", sa.Float(), nullable=False),
        sa.Column("looked_login", sa.Text(), nullable=False),
        sa.Column("rule_id", sa.String(length=64), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("approval_id", name="approval_rule_looks_pkey"),
    )
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for statement in [*GRANTS, *FUNCTIONS]:
        _run(bind, statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        _run(bind, "DROP FUNCTION IF EXISTS public.agentdesk_rules_looked(text, text, text)")
        _run(bind, "DROP FUNCTION IF EXISTS public.agentdesk_rules_decide(text, text, int, text, text)")
    op.drop_table("approval_rule_looks")
