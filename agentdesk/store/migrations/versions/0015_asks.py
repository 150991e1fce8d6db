"""asks: an agent's question to a person, answered exactly once (issue 24, "Questions")

Revision ID: 0015_asks
Revises: 0014_anchor_location
Create Date: 2026-12-06 07:10:00

Both backends: the table `asks` (the question, its options as a JSON array of strings or NULL, the agent
and run it belongs to, its deadline, its status `pending` / `answered` / `expired` / `cancelled`, the
answer, who answered, when, why it closed, its revision, and on PostgreSQL the logins that asked and
answered).

PostgreSQL only (a no-op on SQLite, whose single user owns the file):

- Grants: viewers and agents SELECT; nobody below the owner INSERTs, UPDATEs or DELETEs the table directly.
- `agentdesk_ask(...)`: an agent asks, only in a run its own login wrote (`runs.written_login`, migration
  0013); the owner may ask in any run. EXECUTE: agents.
- `agentdesk_answer(...)`: an operator answers, compare-and-set on `pending`, not expired (server clock) and,
  when given, the revision the operator saw. EXECUTE: operators (so admins). An agent is in no operator group:
  it cannot answer, not even its own question.
- `agentdesk_close_ask(...)`: the asking login (or an operator) cancels a pending ask, or marks it expired
  once its deadline passed. EXECUTE: agents, operators.

Each function writes the row, its audit record (`agentdesk_audit_write`) and its change-log row in the caller's
transaction and answers what it did, so a hand-written client gets exactly what agentdesk does or nothing.
The SQL is written out here, not imported, so the revision stays what it was when later code changes.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0015_asks'
down_revision = '0014_anchor_location'
branch_labels = None
depends_on = None

SAFE = "SET search_path = pg_catalog, pg_temp"
MAX_TEXT_BYTES = 1_000_000
"""A question, an option list or an answer over 1 MB is refused (store.asks.commands.MAX_ASK_BYTES)."""

PARENTS = ("json_build_object('project', a.project_id, 'task', a.task_id, 'session', a.session_id, "
           "'agent', a.agent_id, 'run', a.run_id)::text")

FUNCTIONS = [
    "REVOKE ALL ON public.asks FROM PUBLIC, agentdesk_viewer, agentdesk_operator, agentdesk_admin, agentdesk_agent",
    "GRANT SELECT ON public.asks TO agentdesk_viewer, agentdesk_agent",
    # An agent asks in its own run. Outcome 'ok' with the change, 'not found' (no such run), or an exception
    # naming what is wrong.
    f"""
    CREATE FUNCTION public.agentdesk_ask(ask_id text, run_id text, span_id text, question text, options text,
                                         expires_in float8, actor text, origin text)
    RETURNS TABLE (outcome text, created_at float8, expires_at float8, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        r public.runs;
        now_at float8;
        deadline float8;
        change json;
    BEGIN
        IF NOT public.agentdesk_is_owner() AND NOT pg_has_role(session_user, 'agentdesk_agent', 'MEMBER') THEN
            PERFORM public.agentdesk_refuse('asking a question', 'agent');
        END IF;
        IF ask_id IS NULL OR ask_id = '' OR actor IS NULL OR actor = '' OR question IS NULL
           OR btrim(question) = '' THEN
            RAISE EXCEPTION 'a question needs an id, an actor and some text' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF octet_length(question) > {MAX_TEXT_BYTES} OR octet_length(coalesce(options, '')) > {MAX_TEXT_BYTES} THEN
            RAISE EXCEPTION 'the question is larger than 1 MB, the limit' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF options IS NOT NULL AND (json_typeof(options::json) <> 'array' OR EXISTS (
                SELECT 1 FROM json_array_elements(options::json) e(v) WHERE json_typeof(e.v) <> 'string')) THEN
            RAISE EXCEPTION 'options must be a JSON array of strings' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF expires_in IS NOT NULL AND NOT expires_in > 0 THEN
            RAISE EXCEPTION 'expires_in must be positive seconds' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM public.agentdesk_writer_turn(true);
        SELECT * INTO r FROM public.runs x WHERE x.id = run_id;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::float8, NULL::float8, NULL::json;
            RETURN;
        END IF;
        IF NOT public.agentdesk_is_owner() AND r.written_login IS DISTINCT FROM session_user THEN
            RAISE EXCEPTION '% is an agent that did not write run %; asking in it needs its own agent login',
                session_user, run_id USING ERRCODE = 'insufficient_privilege';
        END IF;
        now_at := public.agentdesk_now();
        deadline := CASE WHEN expires_in IS NULL THEN NULL ELSE now_at + expires_in END;
        INSERT INTO public.asks (id, project_id, task_id, session_id, agent_id, run_id, span_id, question, options,
                                 status, created_at, expires_at, revision, requested_login)
            VALUES (ask_id, r.project_id, r.task_id, r.session_id, r.agent_id, r.id, span_id, question, options,
                    'pending', now_at, deadline, 1, session_user);
        PERFORM public.agentdesk_audit_write(public.agentdesk_py_float(now_at), actor, 'ask.create', 'ask', ask_id,
            '{{"agent_id":' || public.agentdesk_json(r.agent_id)
            || ',"expires_at":' || coalesce(public.agentdesk_py_float(deadline), 'null')
            || ',"options":' || coalesce(options, 'null')
            || ',"question":' || public.agentdesk_json(question)
            || ',"run_id":' || public.agentdesk_json(r.id) || '}}');
        change := public.agentdesk_change(now_at, origin, 'ask', 'insert', ask_id,
            json_build_object('project', r.project_id, 'task', r.task_id, 'session', r.session_id,
                              'agent', r.agent_id, 'run', r.id)::text, 1);
        RETURN QUERY SELECT 'ok'::text, now_at, deadline, json_build_array(change);
    END $$
    """,
    # An operator answers, exactly once. 'not found', 'stale' (another revision), 'lost' (the winner or the
    # expiry is returned), or 'ok' with the change.
    f"""
    CREATE FUNCTION public.agentdesk_answer(ask_id text, answer text, actor text, expected_revision int,
                                            origin text)
    RETURNS TABLE (outcome text, status text, answered_by text, answered_at float8, expires_at float8,
                   revision int, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        a public.asks;
        now_at float8;
        change json;
    BEGIN
        PERFORM public.agentdesk_require('operator', 'answering a question');
        IF actor IS NULL OR actor = '' OR answer IS NULL OR btrim(answer) = '' THEN
            RAISE EXCEPTION 'an answer needs some text and an actor' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF octet_length(answer) > {MAX_TEXT_BYTES} THEN
            RAISE EXCEPTION 'the answer is larger than 1 MB, the limit' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM public.agentdesk_writer_turn(false);
        now_at := public.agentdesk_now();
        SELECT * INTO a FROM public.asks p WHERE p.id = ask_id FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::text, NULL::text, NULL::float8, NULL::float8, NULL::int,
                                NULL::json;
            RETURN;
        END IF;
        IF a.status <> 'pending' OR (a.expires_at IS NOT NULL AND a.expires_at <= now_at) THEN
            RETURN QUERY SELECT 'lost'::text, a.status::text, a.answered_by, a.answered_at, a.expires_at, a.revision,
                                NULL::json;
            RETURN;
        END IF;
        IF expected_revision IS NOT NULL AND expected_revision <> a.revision THEN
            RETURN QUERY SELECT 'stale'::text, a.status::text, a.answered_by, a.answered_at, a.expires_at,
                                a.revision, NULL::json;
            RETURN;
        END IF;
        UPDATE public.asks p SET status = 'answered', answer = agentdesk_answer.answer, answered_by = actor,
            answered_at = now_at, answered_login = session_user, revision = a.revision + 1 WHERE p.id = ask_id;
        PERFORM public.agentdesk_audit_write(public.agentdesk_py_float(now_at), actor, 'ask.answered', 'ask', a.id,
            '{{"answer":' || public.agentdesk_json(answer) || ',"question":' || public.agentdesk_json(a.question)
            || ',"run_id":' || public.agentdesk_json(a.run_id) || '}}');
        change := public.agentdesk_change(now_at, origin, 'ask', 'update', a.id, {PARENTS}, a.revision + 1);
        RETURN QUERY SELECT 'ok'::text, 'answered'::text, actor, now_at, a.expires_at, a.revision + 1,
                            json_build_array(change);
    END $$
    """,
    # The asking login (or an operator) cancels its pending ask, or marks it expired once its deadline passed.
    f"""
    CREATE FUNCTION public.agentdesk_close_ask(ask_id text, new_status text, actor text, reason text, origin text)
    RETURNS TABLE (outcome text, status text, answered_by text, answered_at float8, expires_at float8,
                   revision int, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        a public.asks;
        now_at float8;
        change json;
    BEGIN
        IF new_status IS NULL OR new_status NOT IN ('cancelled', 'expired') OR actor IS NULL OR actor = '' THEN
            RAISE EXCEPTION 'closing a question needs an actor and the status cancelled or expired'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF octet_length(coalesce(reason, '')) > {MAX_TEXT_BYTES} THEN
            RAISE EXCEPTION 'the reason is larger than 1 MB, the limit' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT public.agentdesk_is_owner() AND NOT pg_has_role(session_user, 'agentdesk_operator', 'MEMBER') THEN
            IF NOT pg_has_role(session_user, 'agentdesk_agent', 'MEMBER') THEN
                PERFORM public.agentdesk_refuse('closing a question', 'agent or operator');
            END IF;
            IF EXISTS (SELECT 1 FROM public.asks p WHERE p.id = ask_id
                       AND p.requested_login IS DISTINCT FROM session_user) THEN
                RAISE EXCEPTION '% is an agent that did not ask question %; closing it needs operator', session_user,
                    ask_id USING ERRCODE = 'insufficient_privilege';
            END IF;
        END IF;
        PERFORM public.agentdesk_writer_turn(false);
        now_at := public.agentdesk_now();
        SELECT * INTO a FROM public.asks p WHERE p.id = ask_id FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::text, NULL::text, NULL::float8, NULL::float8, NULL::int,
                                NULL::json;
            RETURN;
        END IF;
        IF a.status <> 'pending' OR (new_status = 'expired' AND (a.expires_at IS NULL OR a.expires_at > now_at)) THEN
            RETURN QUERY SELECT 'lost'::text, a.status::text, a.answered_by, a.answered_at, a.expires_at, a.revision,
                                NULL::json;
            RETURN;
        END IF;
        UPDATE public.asks p SET status = new_status, answered_at = now_at,
            answered_by = CASE WHEN new_status = 'cancelled' THEN actor END,
            reason = agentdesk_close_ask.reason, revision = a.revision + 1 WHERE p.id = ask_id;
        PERFORM public.agentdesk_audit_write(public.agentdesk_py_float(now_at), actor, 'ask.' || new_status, 'ask',
            a.id, '{{"expires_at":' || coalesce(public.agentdesk_py_float(a.expires_at), 'null')
            || ',"reason":' || public.agentdesk_json(reason)
            || ',"run_id":' || public.agentdesk_json(a.run_id) || '}}');
        change := public.agentdesk_change(now_at, origin, 'ask', 'update', a.id, {PARENTS}, a.revision + 1);
        RETURN QUERY SELECT 'ok'::text, new_status, CASE WHEN new_status = 'cancelled' THEN actor END, now_at,
                            a.expires_at, a.revision + 1, json_build_array(change);
    END $$
    """,
    "REVOKE ALL ON FUNCTION public.agentdesk_ask(text, text, text, text, text, float8, text, text) FROM PUBLIC",
    "GRANT EXECUTE ON FUNCTION public.agentdesk_ask(text, text, text, text, text, float8, text, text) "
    "TO agentdesk_agent",
    "REVOKE ALL ON FUNCTION public.agentdesk_answer(text, text, text, int, text) FROM PUBLIC",
    "GRANT EXECUTE ON FUNCTION public.agentdesk_answer(text, text, text, int, text) TO agentdesk_operator",
    "REVOKE ALL ON FUNCTION public.agentdesk_close_ask(text, text, text, text, text) FROM PUBLIC",
    "GRANT EXECUTE ON FUNCTION public.agentdesk_close_ask(text, text, text, text, text) "
    "TO agentdesk_agent, agentdesk_operator",
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
        "asks",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("task_id", sa.String(64), sa.ForeignKey("tasks.id"), nullable=False),
        sa.Column("session_id", sa.String(64), sa.ForeignKey("sessions.id"), nullable=False),
        sa.Column("agent_id", sa.String(64), sa.ForeignKey("agents.id"), nullable=False),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("span_id", sa.String(64)),
        sa.Column("question", sa.Text, nullable=False),
        sa.Column("options", sa.Text),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float),
        sa.Column("answered_at", sa.Float),
        sa.Column("answered_by", sa.Text),
        sa.Column("answer", sa.Text),
        sa.Column("reason", sa.Text),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("requested_login", sa.Text),
        sa.Column("answered_login", sa.Text),
    )
    op.create_index("asks_by_status", "asks", ["status", "created_at"])
    op.create_index("asks_by_run", "asks", ["run_id"])
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for statement in FUNCTIONS:
        _run(bind, statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        _run(bind, "DROP FUNCTION IF EXISTS public.agentdesk_close_ask(text, text, text, text, text)")
        _run(bind, "DROP FUNCTION IF EXISTS public.agentdesk_answer(text, text, text, int, text)")
        _run(bind, "DROP FUNCTION IF EXISTS public.agentdesk_ask(text, text, text, text, text, float8, text, text)")
    op.drop_index("asks_by_run", "asks")
    op.drop_index("asks_by_status", "asks")
    op.drop_table("asks")
