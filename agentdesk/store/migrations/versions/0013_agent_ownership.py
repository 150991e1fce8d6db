"""agent ownership: an agent updates only the runtime rows it wrote; a person's turn ends an agent holding it

Revision ID: 0013_agent_ownership
Revises: 0012_least_privilege
Create Date: 2026-12-06 05:30:00

PostgreSQL only (a no-op on SQLite, whose single user owns the file and has no logins):

- `runs`, `spans`, `tool_calls`, `context_groups` and `context_items` get `written_login`: the login that
  inserted the row, set by a trigger to `session_user` whatever the INSERT says (so it cannot be forged), and
  never changed by an UPDATE. An agent-level login (a member of `agentdesk_agent`, not the owner) may UPDATE
  only rows its own login wrote: a second agent cannot end, rename, re-home or re-status the first agent's run,
  span or tool call. Viewers write nothing; operators and admins update these tables only through the
  functions, which run as the owner and are not bound by it. Rows written before this revision have no
  `written_login`: no agent may update them (an operator's functions still may).
- A person's writers' turn (`agentdesk_writer_turn(false)` called by anyone but an agent) no longer waits
  behind an agent-level transaction that holds the queue: it waits at most `TURN_GRACE_MS` (or half its own
  lock_timeout, if shorter), then ends the agent-level sessions holding the queue (`pg_terminate_backend`,
  which rolls their transaction back whole) and takes its turn. An agent's writes are milliseconds; one that
  holds the queue longer while a person waits is stuck or hostile, and every runtime write is a
  compare-and-set on ids chosen before the transaction, so trying it again is safe. Ending a session needs the
  owner to be a superuser or a member of `pg_signal_backend`; without it the person waits the busy timeout, as
  before, and fails in one sentence. An agent login always queues among runtime writers first (the row of
  `agentdesk_runtime_queue`), whatever it passes, so however many sessions it opens, at most one of them waits
  in the writers' queue ahead of a person.
- `agent-token revoke` locks the token rows first through `agentdesk_lock_tokens` (operators), which ends the
  agent-level sessions holding row locks on `agent_tokens` after the same grace (an agent may stamp any
  token's `last_used_at`, so it may lock every token row).

The SQL is written out here, not imported, so the revision stays what it was when later code changes.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0013_agent_ownership'
down_revision = '0012_least_privilege'
branch_labels = None
depends_on = None

SAFE = "SET search_path = pg_catalog, pg_temp"
OWNED = ("agents", "runs", "spans", "tool_calls", "context_groups", "context_items")
TURN_GRACE_MS = 500
"""How long a person waits for the writers' turn behind an agent-level holder before ending its session."""

OWNERSHIP = [
    f"""
    CREATE FUNCTION public.agentdesk_row_written() RETURNS trigger LANGUAGE plpgsql {SAFE} AS $$
    BEGIN
        NEW.written_login := session_user;
        RETURN NEW;
    END $$
    """,
    # An agent updates only what its own login wrote; agentdesk's functions (current_user is the owner) and
    # every other level are not bound by it (they have no UPDATE grant on these tables but through them).
    f"""
    CREATE FUNCTION public.agentdesk_row_owned() RETURNS trigger LANGUAGE plpgsql {SAFE} AS $$
    BEGIN
        NEW.written_login := OLD.written_login;
        IF OLD.written_login IS NOT DISTINCT FROM session_user THEN
            RETURN NEW;  -- the writer itself (the common case, checked first: the level costs role lookups)
        END IF;
        IF public.agentdesk_is_owner(current_user) OR public.agentdesk_level() <> 'agent' THEN
            RETURN NEW;
        END IF;
        -- row-level security already hides such rows from an agent's UPDATE; this holds if a policy is ever dropped
        RAISE EXCEPTION '% is an agent that did not write % %; changing it needs its own agent login or operator',
            session_user, rtrim(TG_TABLE_NAME, 's'), OLD.id USING ERRCODE = 'insufficient_privilege';
    END $$
    """,
    *(statement for table in OWNED for statement in (
        f"ALTER TABLE public.{table} ADD COLUMN written_login text",
        f"""
        CREATE TRIGGER {table}_written BEFORE INSERT ON public.{table}
            FOR EACH ROW EXECUTE FUNCTION public.agentdesk_row_written()
        """,
        f"""
        CREATE TRIGGER {table}_owned BEFORE UPDATE ON public.{table}
            FOR EACH ROW EXECUTE FUNCTION public.agentdesk_row_owned()
        """,
        # Row-level security makes another login's rows invisible to an agent's UPDATE and to its row locks
        # (SELECT ... FOR UPDATE / FOR SHARE apply the UPDATE policy): an agent cannot hold a row a person's
        # function updates (a decision sets its tool call's status, a context edit bumps the agent) unless it
        # wrote that row. Everyone reads every row, as before; the owner (so the functions) is not bound.
        f"ALTER TABLE public.{table} ENABLE ROW LEVEL SECURITY",
        f"CREATE POLICY {table}_read ON public.{table} FOR SELECT USING (true)",
        f"CREATE POLICY {table}_append ON public.{table} FOR INSERT TO agentdesk_agent WITH CHECK (true)",
        f"CREATE POLICY {table}_own ON public.{table} FOR UPDATE TO agentdesk_agent "
        "USING (written_login = session_user) WITH CHECK (true)",
    )),
    "REVOKE ALL ON FUNCTION public.agentdesk_row_written(), public.agentdesk_row_owned() FROM PUBLIC",
]

TURN = [
    # Ends the agent-level sessions (not the caller's) holding a lock of one of `modes` on `rel`: called by a
    # person's write after it waited the grace for that lock. Internal (no EXECUTE for anyone).
    f"""
    CREATE FUNCTION public.agentdesk_end_agents_holding(rel regclass, modes text[]) RETURNS int
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    DECLARE
        holder record;
        ended int := 0;
    BEGIN
        FOR holder IN
            SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'relation' AND l.relation = rel AND l.mode = ANY (modes)
              AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
              AND l.granted AND l.pid <> pg_backend_pid()
              AND pg_has_role(a.usename, 'agentdesk_agent', 'MEMBER')
              AND NOT pg_has_role(a.usename, 'agentdesk_operator', 'MEMBER')
              AND NOT public.agentdesk_is_owner(a.usename)
        LOOP
            BEGIN
                IF pg_terminate_backend(holder.pid) THEN
                    ended := ended + 1;
                    RAISE LOG 'agentdesk: ended agent session % that held % while a person waited', holder.pid, rel;
                END IF;
            EXCEPTION WHEN insufficient_privilege THEN
                NULL;  -- the owner may not end sessions (no pg_signal_backend): the person waits its busy timeout
            END;
        END LOOP;
        RETURN ended;
    END $$
    """,
    "REVOKE ALL ON FUNCTION public.agentdesk_end_agents_holding(regclass, text[]) FROM PUBLIC",
    # A person's turn ends the agent-level sessions that hold the queue past the grace. Runtime writers queue as
    # before; an agent login queues as a runtime writer whatever it passes.
    f"""
    CREATE OR REPLACE FUNCTION public.agentdesk_writer_turn(runtime boolean) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    DECLARE
        budget text := current_setting('lock_timeout');
        budget_ms float8;
        waited_ms float8;
        started timestamptz := clock_timestamp();
    BEGIN
        PERFORM public.agentdesk_require_writer('writing');
        IF runtime OR public.agentdesk_level() = 'agent' THEN
            -- an agent always queues among runtime writers first, so at most one agent-level session waits in
            -- the writers' queue ahead of a person, however many sessions it opens
            PERFORM 1 FROM public.agentdesk_runtime_queue q WHERE q.id = 1 FOR UPDATE;
            LOCK TABLE public.agentdesk_writer_queue IN EXCLUSIVE MODE;
            RETURN;
        END IF;
        SELECT s.setting::float8 INTO budget_ms FROM pg_settings s WHERE s.name = 'lock_timeout';  -- in ms
        LOOP
            waited_ms := extract(epoch FROM clock_timestamp() - started) * 1000;
            BEGIN
                -- a subtransaction: a timed-out wait rolls the setting back with it
                PERFORM set_config('lock_timeout', greatest(1, CASE WHEN budget_ms > 0
                    THEN least({TURN_GRACE_MS}, budget_ms / 2, budget_ms - waited_ms)
                    ELSE {TURN_GRACE_MS} END)::int::text, true);
                LOCK TABLE public.agentdesk_writer_queue IN EXCLUSIVE MODE;
                PERFORM set_config('lock_timeout', budget, true);
                RETURN;
            EXCEPTION WHEN lock_not_available THEN
                IF budget_ms > 0 AND extract(epoch FROM clock_timestamp() - started) * 1000 >= budget_ms THEN
                    RAISE;  -- the busy timeout: nothing written, "locked by another writer"
                END IF;
            END;
            PERFORM public.agentdesk_end_agents_holding('public.agentdesk_writer_queue'::regclass,
                                                        ARRAY['ExclusiveLock']);
        END LOOP;
    END $$
    """,
]

TOKENS = [
    # An operator's revoke locks the token rows first, ending after the grace the agent-level sessions that could
    # hold them (an agent may stamp `last_used_at`, so it may lock every token row: FOR UPDATE needs only that).
    f"""
    CREATE FUNCTION public.agentdesk_lock_tokens(ids text[]) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        budget text := current_setting('lock_timeout');
        budget_ms float8;
        waited_ms float8;
        started timestamptz := clock_timestamp();
    BEGIN
        PERFORM public.agentdesk_require('operator', 'revoking an agent token');
        SELECT s.setting::float8 INTO budget_ms FROM pg_settings s WHERE s.name = 'lock_timeout';
        LOOP
            waited_ms := extract(epoch FROM clock_timestamp() - started) * 1000;
            BEGIN
                PERFORM set_config('lock_timeout', greatest(1, CASE WHEN budget_ms > 0
                    THEN least({TURN_GRACE_MS}, budget_ms / 2, budget_ms - waited_ms)
                    ELSE {TURN_GRACE_MS} END)::int::text, true);
                PERFORM 1 FROM public.agent_tokens t WHERE t.id = ANY (ids) ORDER BY t.id FOR UPDATE;
                PERFORM set_config('lock_timeout', budget, true);
                RETURN;
            EXCEPTION WHEN lock_not_available THEN
                IF budget_ms > 0 AND extract(epoch FROM clock_timestamp() - started) * 1000 >= budget_ms THEN
                    RAISE;
                END IF;
            END;
            PERFORM public.agentdesk_end_agents_holding('public.agent_tokens'::regclass,
                                                        ARRAY['RowShareLock', 'RowExclusiveLock']);
        END LOOP;
    END $$
    """,
    "REVOKE ALL ON FUNCTION public.agentdesk_lock_tokens(text[]) FROM PUBLIC",
    "GRANT EXECUTE ON FUNCTION public.agentdesk_lock_tokens(text[]) TO agentdesk_operator",
]

TURN_0012 = f"""
    CREATE OR REPLACE FUNCTION public.agentdesk_writer_turn(runtime boolean) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    BEGIN
        PERFORM public.agentdesk_require_writer('writing');
        IF runtime THEN
            PERFORM 1 FROM public.agentdesk_runtime_queue q WHERE q.id = 1 FOR UPDATE;
        END IF;
        LOCK TABLE public.agentdesk_writer_queue IN EXCLUSIVE MODE;
    END $$
    """


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
    for statement in [*OWNERSHIP, *TURN, *TOKENS]:
        _run(bind, statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    _run(bind, TURN_0012)
    _run(bind, "DROP FUNCTION IF EXISTS public.agentdesk_lock_tokens(text[])")
    _run(bind, "DROP FUNCTION IF EXISTS public.agentdesk_end_agents_holding(regclass, text[])")
    for table in OWNED:
        for policy in ("read", "append", "own"):
            _run(bind, f"DROP POLICY IF EXISTS {table}_{policy} ON public.{table}")
        _run(bind, f"ALTER TABLE public.{table} DISABLE ROW LEVEL SECURITY")
        _run(bind, f"DROP TRIGGER IF EXISTS {table}_owned ON public.{table}")
        _run(bind, f"DROP TRIGGER IF EXISTS {table}_written ON public.{table}")
        _run(bind, f"ALTER TABLE public.{table} DROP COLUMN IF EXISTS written_login")
    _run(bind, "DROP FUNCTION IF EXISTS public.agentdesk_row_owned()")
    _run(bind, "DROP FUNCTION IF EXISTS public.agentdesk_row_written()")
