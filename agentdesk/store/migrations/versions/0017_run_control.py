"""run control: an operator pauses, resumes and stops a run; the agent honours it at its checkpoints (issue 24)

Revision ID: 0017_run_control
Revises: 0016_messages
Create Date: 2026-12-06 07:20:00

Both backends: the `run_controls` table, one row per run an operator ever held (no row: running). `state` is
running, paused, stopping (asked to stop; the agent has not reached a checkpoint yet) or stopped; `set_by`,
`set_at`, `reason` say who set it, when and why; `set_login` is the server-known login (PostgreSQL; empty on
SQLite); `held_at` is when the agent reported itself blocked at a checkpoint while paused.

PostgreSQL only (SQLite has one user, who owns the file):

- Nobody writes `run_controls` directly: viewers, agents, operators and admins may SELECT it (an agent reads its
  own run's state, everyone's window shows it), no group may INSERT, UPDATE, DELETE, TRUNCATE or LOCK it.
- `agentdesk_run_control(run_id, action, actor, reason, origin)`: pause (a running run), resume (a paused one)
  or stop (any unfinished one), compare-and-set on the state under the writers' turn; audited (`run.pause`,
  `run.resume`, `run.stop`) and change-logged as a run update. The outcome says why nothing was written: 'not
  found', 'finished' (the run ended: its status), 'lost' (the state was not the one the action needs: who set
  it). EXECUTE: operators (so admins).
- `agentdesk_run_checkpoint(run_id, actor, origin)`: what the agent calls at a step boundary. Paused: it
  stamps `held_at` once (a run update on the bus: the window and the bench see the agent blocked). Stopping:
  it ends the run `cancelled` with "stopped by <who>: <reason>" as its error, the state becomes stopped, and
  the record `run.stopped` names who stopped it. It never lifts a pause or undoes a stop. An agent may call it
  only for a run its own login wrote. EXECUTE: agents and operators (a runtime may connect as an operator).
- A trigger keeps a stopped run cancelled: no login below the owner writes another status over it.

The SQL is written out here, not imported, so the revision stays what it was when later code changes.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0017_run_control'
down_revision = '0016_messages'
branch_labels = None
depends_on = None

SAFE = "SET search_path = pg_catalog, pg_temp"
GROUPS = "agentdesk_viewer, agentdesk_operator, agentdesk_admin, agentdesk_agent"
FINISHED = "('done', 'failed', 'cancelled')"

PARENTS = ("json_build_object('project', r.project_id, 'task', r.task_id, 'session', r.session_id, "
           "'agent', r.agent_id)::text")

FUNCTIONS = [
    f"""
    CREATE FUNCTION public.agentdesk_run_control(run_id text, action text, actor text, reason text, origin text)
    RETURNS TABLE (outcome text, state text, set_by text, set_at float8, why text, run_status text,
                   set_login text, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        r public.runs;
        c public.run_controls;
        now_at float8;
        current_state text;
        new_state text;
        change json;
    BEGIN
        PERFORM public.agentdesk_require('operator', CASE action WHEN 'pause' THEN 'pausing a run'
            WHEN 'resume' THEN 'resuming a run' ELSE 'stopping a run' END);
        IF action IS NULL OR action NOT IN ('pause', 'resume', 'stop') THEN
            RAISE EXCEPTION 'the action must be pause, resume or stop' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF actor IS NULL OR btrim(actor) = '' THEN
            RAISE EXCEPTION 'controlling a run needs an actor' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM public.agentdesk_writer_turn(false);
        now_at := public.agentdesk_now();
        SELECT * INTO r FROM public.runs x WHERE x.id = run_id;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::text, NULL::text, NULL::float8, NULL::text, NULL::text,
                                NULL::text, NULL::json;
            RETURN;
        END IF;
        SELECT * INTO c FROM public.run_controls k WHERE k.run_id = agentdesk_run_control.run_id FOR UPDATE;
        current_state := coalesce(c.state, 'running');
        IF r.status IN {FINISHED} OR current_state = 'stopped' THEN
            RETURN QUERY SELECT 'finished'::text, current_state, c.set_by, c.set_at, c.reason, r.status::text,
                                c.set_login, NULL::json;
            RETURN;
        END IF;
        new_state := CASE WHEN action = 'pause' AND current_state = 'running' THEN 'paused'
                          WHEN action = 'resume' AND current_state = 'paused' THEN 'running'
                          WHEN action = 'stop' AND current_state IN ('running', 'paused') THEN 'stopping' END;
        IF new_state IS NULL THEN
            RETURN QUERY SELECT 'lost'::text, current_state, c.set_by, c.set_at, c.reason, r.status::text,
                                c.set_login, NULL::json;
            RETURN;
        END IF;
        INSERT INTO public.run_controls AS k (run_id, state, set_by, set_at, reason, set_login, held_at, revision)
            VALUES (run_id, new_state, actor, now_at, reason, session_user, NULL, 1)
            ON CONFLICT ON CONSTRAINT run_controls_pkey DO UPDATE SET state = new_state, set_by = actor,
                set_at = now_at, reason = agentdesk_run_control.reason, set_login = session_user, held_at = NULL,
                revision = k.revision + 1;
        PERFORM public.agentdesk_audit_write(public.agentdesk_py_float(now_at), actor, 'run.' || action, 'run',
            run_id, '{{"from":' || public.agentdesk_json(current_state) || ',"reason":'
            || public.agentdesk_json(reason) || ',"to":' || public.agentdesk_json(new_state) || '}}');
        change := public.agentdesk_change(now_at, origin, 'run', 'update', run_id, {PARENTS}, r.revision);
        RETURN QUERY SELECT 'ok'::text, new_state, actor, now_at, reason, r.status::text, session_user::text,
                            json_build_array(change);
    END $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_run_checkpoint(run_id text, actor text, origin text)
    RETURNS TABLE (outcome text, state text, set_by text, set_at float8, why text, held_at float8,
                   changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        r public.runs;
        c public.run_controls;
        now_at float8;
        change json;
        ended text;
    BEGIN
        PERFORM public.agentdesk_require_writer('reaching a checkpoint');
        SELECT * INTO r FROM public.runs x WHERE x.id = run_id;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::text, NULL::text, NULL::float8, NULL::text,
                                NULL::float8, NULL::json;
            RETURN;
        END IF;
        IF NOT public.agentdesk_is_owner() AND NOT pg_has_role(session_user, 'agentdesk_operator', 'MEMBER')
           AND r.written_login IS DISTINCT FROM session_user THEN
            RAISE EXCEPTION '% is an agent that did not write run %; its checkpoint needs its own agent login '
                'or operator', session_user, run_id USING ERRCODE = 'insufficient_privilege';
        END IF;
        SELECT * INTO c FROM public.run_controls k WHERE k.run_id = agentdesk_run_checkpoint.run_id;
        IF NOT FOUND OR c.state = 'running' OR c.state = 'stopped' OR (c.state = 'paused' AND c.held_at IS NOT NULL)
        THEN  -- nothing to write: the common case costs one read
            RETURN QUERY SELECT 'ok'::text, coalesce(c.state, 'running')::text, c.set_by, c.set_at, c.reason, c.held_at,
                                NULL::json;
            RETURN;
        END IF;
        PERFORM public.agentdesk_writer_turn(true);
        now_at := public.agentdesk_now();
        SELECT * INTO c FROM public.run_controls k WHERE k.run_id = agentdesk_run_checkpoint.run_id FOR UPDATE;
        IF c.state = 'paused' AND c.held_at IS NULL THEN
            UPDATE public.run_controls k SET held_at = now_at, revision = k.revision + 1
                WHERE k.run_id = agentdesk_run_checkpoint.run_id;
            change := public.agentdesk_change(now_at, origin, 'run', 'update', run_id, {PARENTS}, r.revision);
            RETURN QUERY SELECT 'held'::text, c.state::text, c.set_by, c.set_at, c.reason, now_at,
                                json_build_array(change);
            RETURN;
        END IF;
        IF c.state <> 'stopping' THEN  -- resumed meanwhile, or already stopped
            RETURN QUERY SELECT 'ok'::text, c.state::text, c.set_by, c.set_at, c.reason, c.held_at, NULL::json;
            RETURN;
        END IF;
        ended := 'stopped by ' || CASE WHEN c.set_login IS NOT NULL AND c.set_login <> c.set_by
                                       THEN c.set_login || ' (typed: ' || c.set_by || ')' ELSE c.set_by END
                 || coalesce(': ' || nullif(c.reason, ''), '');
        UPDATE public.run_controls k SET state = 'stopped', held_at = NULL, revision = k.revision + 1
            WHERE k.run_id = agentdesk_run_checkpoint.run_id;
        UPDATE public.runs x SET status = 'cancelled', ended_at = now_at, error = ended, revision = x.revision + 1
            WHERE x.id = run_id;
        PERFORM public.agentdesk_audit_write(public.agentdesk_py_float(now_at), coalesce(nullif(actor, ''), 'runtime'),
            'run.stopped', 'run', run_id, '{{"reason":' || public.agentdesk_json(c.reason) || ',"stopped_by":'
            || public.agentdesk_json(c.set_by) || '}}');
        change := public.agentdesk_change(now_at, origin, 'run', 'update', run_id, {PARENTS}, r.revision + 1);
        RETURN QUERY SELECT 'stopped'::text, 'stopped'::text, c.set_by, c.set_at, c.reason, NULL::float8,
                            json_build_array(change);
    END $$
    """,
    # A stopped run stays cancelled: below the owner (so the functions), no login writes another status over it.
    f"""
    CREATE FUNCTION public.agentdesk_run_stop_kept() RETURNS trigger LANGUAGE plpgsql {SAFE} AS $$
    BEGIN
        IF NEW.status IS DISTINCT FROM OLD.status AND NOT public.agentdesk_is_owner(current_user)
           AND EXISTS (SELECT 1 FROM public.run_controls k WHERE k.run_id = OLD.id AND k.state = 'stopped') THEN
            RAISE EXCEPTION 'run % was stopped by an operator; its status stays cancelled', OLD.id
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER runs_stop_kept BEFORE UPDATE OF status ON public.runs
        FOR EACH ROW EXECUTE FUNCTION public.agentdesk_run_stop_kept()
    """,
    "REVOKE ALL ON FUNCTION public.agentdesk_run_stop_kept() FROM PUBLIC",
    "REVOKE ALL ON FUNCTION public.agentdesk_run_control(text, text, text, text, text) FROM PUBLIC",
    "REVOKE ALL ON FUNCTION public.agentdesk_run_checkpoint(text, text, text) FROM PUBLIC",
    "GRANT EXECUTE ON FUNCTION public.agentdesk_run_control(text, text, text, text, text) TO agentdesk_operator",
    "GRANT EXECUTE ON FUNCTION public.agentdesk_run_checkpoint(text, text, text) "
    "TO agentdesk_agent, agentdesk_operator",
]

GRANTS = [
    f"REVOKE ALL ON public.run_controls FROM PUBLIC, {GROUPS}",
    f"GRANT SELECT ON public.run_controls TO {GROUPS}",
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
        "run_controls",
        sa.Column("run_id", sa.String(length=64), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("set_by", sa.Text(), nullable=False),
        sa.Column("set_at", sa.Float(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("set_login", sa.Text(), nullable=True),
        sa.Column("held_at", sa.Float(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
    )
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for statement in [*GRANTS, *FUNCTIONS]:
        _run(bind, statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        _run(bind, "DROP TRIGGER IF EXISTS runs_stop_kept ON public.runs")
        _run(bind, "DROP FUNCTION IF EXISTS public.agentdesk_run_stop_kept()")
        _run(bind, "DROP FUNCTION IF EXISTS public.agentdesk_run_checkpoint(text, text, text)")
        _run(bind, "DROP FUNCTION IF EXISTS public.agentdesk_run_control(text, text, text, text, text)")
    op.drop_table("run_controls")
