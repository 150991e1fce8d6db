"""messages: an operator's message queued for an agent, delivered into its context at its next model call

Revision ID: 0016_messages
Revises: 0015_asks
Create Date: 2026-12-06 07:10:00

Both backends: the `messages` table. A message is `pending` until the agent takes it (then `delivered`, with
the context item it became) or an operator cancels it (`cancelled`); both moves are a compare-and-set on
`status = 'pending'`, so a cancel racing the delivery wins or loses whole.

PostgreSQL only (a no-op on SQLite, whose single user owns the file):

- Nobody writes `messages` directly. Viewers (so operators and admins) read every row; an agent-level login
  reads only the messages of agents its own login wrote (row-level security, the ownership of 0013).
- `agentdesk_send_message` and `agentdesk_cancel_message`: operators (and admins) only. A message to an agent
  whose session finished is refused ('finished'); content over `MAX_BYTES` is refused.
- `agentdesk_take_messages`: the agent takes its own pending messages: an agent-level login only for an agent
  its login wrote (`agents.written_login`), an operator's runtime for any. Each message becomes a turn group
  and a context item (role `user`) at the end of the agent's context, in one transaction with the status
  change, the audit records and the change-log rows. An agent cannot send, cancel or rewrite a message: it has
  no grant on the table and no EXECUTE on the operators' functions.

The SQL is written out here, not imported, so the revision stays what it was when later code changes.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0016_messages'
down_revision = '0015_asks'
branch_labels = None
depends_on = None

SAFE = "SET search_path = pg_catalog, pg_temp"
MAX_BYTES = 1_000_000
OPERATORS = "agentdesk_operator, agentdesk_admin"

# The change-log row of a message: its agent and session are its parents (the context editor follows its agent).
MESSAGE_CHANGE = ("public.agentdesk_change(now_at, origin, 'message', {op}, m.id, "
                  "json_build_object('agent', m.agent_id, 'session', m.session_id)::text, m.revision)")

FUNCTIONS = [
    f"""
    CREATE FUNCTION public.agentdesk_send_message(message_id text, agent_id text, content text, actor text,
                                                  origin text)
    RETURNS TABLE (outcome text, status text, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        g public.agents;
        s public.sessions;
        m public.messages;
        now_at float8;
    BEGIN
        PERFORM public.agentdesk_require('operator', 'sending a message');
        IF message_id IS NULL OR content IS NULL OR actor IS NULL OR btrim(actor) = '' THEN
            RAISE EXCEPTION 'a message needs an id, its content and an actor' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF btrim(content) = '' THEN
            RETURN QUERY SELECT 'empty'::text, NULL::text, NULL::json;
            RETURN;
        END IF;
        IF octet_length(content) > {MAX_BYTES} THEN
            RETURN QUERY SELECT 'too large'::text, NULL::text, NULL::json;
            RETURN;
        END IF;
        PERFORM public.agentdesk_writer_turn(false);
        now_at := public.agentdesk_now();
        SELECT * INTO g FROM public.agents a WHERE a.id = agent_id;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::text, NULL::json;
            RETURN;
        END IF;
        SELECT * INTO s FROM public.sessions x WHERE x.id = g.session_id;
        IF s.status IN ('done', 'failed', 'cancelled') THEN
            RETURN QUERY SELECT 'finished'::text, s.status::text, NULL::json;
            RETURN;
        END IF;
        INSERT INTO public.messages AS n (id, agent_id, session_id, content, status, created_at, created_by,
                                          created_login, revision)
            VALUES (message_id, g.id, g.session_id, content, 'pending', now_at, actor, session_user, 1)
            RETURNING * INTO m;
        PERFORM public.agentdesk_audit_write(public.agentdesk_py_float(now_at), actor, 'message.send', 'message',
            m.id, '{{"agent":' || public.agentdesk_json(g.id)
            || ',"bytes":' || octet_length(content)
            || ',"content_hash":' || public.agentdesk_json('sha256:' || encode(sha256(convert_to(content, 'UTF8')),
                                                                                'hex')) || '}}');
        RETURN QUERY SELECT 'ok'::text, 'pending'::text, json_build_array({MESSAGE_CHANGE.format(op="'insert'")});
    END $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_cancel_message(message_id text, actor text, origin text)
    RETURNS TABLE (outcome text, status text, settled_by text, settled_at float8, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        m public.messages;
        now_at float8;
    BEGIN
        PERFORM public.agentdesk_require('operator', 'cancelling a message');
        IF actor IS NULL OR btrim(actor) = '' THEN
            RAISE EXCEPTION 'cancelling needs an actor' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM public.agentdesk_writer_turn(false);
        now_at := public.agentdesk_now();
        UPDATE public.messages x SET status = 'cancelled', settled_at = now_at, settled_by = actor,
            revision = x.revision + 1
            WHERE x.id = message_id AND x.status = 'pending' RETURNING * INTO m;
        IF NOT FOUND THEN
            SELECT * INTO m FROM public.messages x WHERE x.id = message_id;
            IF NOT FOUND THEN
                RETURN QUERY SELECT 'not found'::text, NULL::text, NULL::text, NULL::float8, NULL::json;
                RETURN;
            END IF;
            RETURN QUERY SELECT 'lost'::text, m.status::text, m.settled_by::text, m.settled_at::float8, NULL::json;
            RETURN;
        END IF;
        PERFORM public.agentdesk_audit_write(public.agentdesk_py_float(now_at), actor, 'message.cancel', 'message',
            m.id, '{{"agent":' || public.agentdesk_json(m.agent_id) || '}}');
        RETURN QUERY SELECT 'ok'::text, 'cancelled'::text, actor, now_at,
            json_build_array({MESSAGE_CHANGE.format(op="'update'")});
    END $$
    """,
    # The agent takes its pending messages: each becomes a turn group and an item at the end of its context.
    f"""
    CREATE FUNCTION public.agentdesk_take_messages(agent_id text, actor text, origin text)
    RETURNS TABLE (message_id text, item_id text, content text, created_by text, created_at float8, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        g public.agents;
        m public.messages;
        now_at float8;
        lvl text := public.agentdesk_level();
        next_ordinal int;
        next_position int;
        gid text;
        iid text;
        tokens int;
        done json[];
    BEGIN
        IF lvl NOT IN ('owner', 'admin', 'operator', 'agent') THEN
            PERFORM public.agentdesk_refuse('taking messages', 'agent or operator');
        END IF;
        IF actor IS NULL OR btrim(actor) = '' THEN
            RAISE EXCEPTION 'taking messages needs an actor' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF lvl = 'agent' AND EXISTS (SELECT 1 FROM public.agents a WHERE a.id = agent_id
                                     AND a.written_login IS DISTINCT FROM session_user) THEN
            RAISE EXCEPTION '% is an agent that did not register agent %; taking its messages needs its own agent '
                'login or operator', session_user, agent_id USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM public.messages x WHERE x.agent_id = agent_id AND x.status = 'pending') THEN
            RETURN;  -- the common case, without waiting for the writers' turn
        END IF;
        PERFORM public.agentdesk_writer_turn(true);
        now_at := public.agentdesk_now();
        SELECT * INTO g FROM public.agents a WHERE a.id = agent_id FOR UPDATE;
        FOR m IN SELECT * FROM public.messages x WHERE x.agent_id = agent_id AND x.status = 'pending'
                 ORDER BY x.created_at, x.id FOR UPDATE LOOP
            SELECT coalesce(max(c.ordinal), 0) + 1 INTO next_ordinal FROM public.context_groups c
                WHERE c.agent_id = agent_id;
            SELECT coalesce(max(c.position), 0) + 1 INTO next_position FROM public.context_items c
                WHERE c.agent_id = agent_id;
            gid := 'grp_' || substr(md5(random()::text || clock_timestamp()::text || m.id), 1, 16);
            iid := 'itm_' || substr(md5(random()::text || clock_timestamp()::text || m.id || 'i'), 1, 16);
            tokens := public.agentdesk_tokens(m.content);
            INSERT INTO public.context_groups (id, agent_id, ordinal, kind, revision, created_at)
                VALUES (gid, agent_id, next_ordinal, 'message', 2, now_at);
            INSERT INTO public.context_items (id, agent_id, group_id, position, kind, role, content, visible, locked,
                                              revision, token_estimate, compaction_id, summary_of, removed,
                                              created_at)
                VALUES (iid, agent_id, gid, next_position, 'message', 'user', m.content, true, false, 1, tokens,
                        NULL, NULL, false, now_at);
            INSERT INTO public.context_item_revisions (item_id, revision, content, token_estimate, created_at)
                VALUES (iid, 1, m.content, tokens, now_at);
            UPDATE public.messages x SET status = 'delivered', settled_at = now_at, settled_by = actor,
                item_id = iid, revision = x.revision + 1 WHERE x.id = m.id AND x.status = 'pending'
                RETURNING * INTO m;
            UPDATE public.agents a SET context_revision = a.context_revision + 1 WHERE a.id = agent_id
                RETURNING * INTO g;
            PERFORM public.agentdesk_audit_write(public.agentdesk_py_float(now_at), actor, 'message.deliver',
                'message', m.id, '{{"agent":' || public.agentdesk_json(agent_id)
                || ',"item":' || public.agentdesk_json(iid) || '}}');
            done := ARRAY[
                public.agentdesk_change(now_at, origin, 'context_group', 'insert', gid,
                                        json_build_object('agent', agent_id)::text, NULL),
                public.agentdesk_change(now_at, origin, 'context_item', 'insert', iid,
                                        json_build_object('agent', agent_id, 'group', gid)::text, 1),
                public.agentdesk_change(now_at, origin, 'context_group', 'update', gid,
                                        json_build_object('agent', agent_id)::text, 2),
                public.agentdesk_change(now_at, origin, 'context', 'update', g.id,
                                        json_build_object('agent', g.id, 'session', g.session_id)::text,
                                        g.context_revision),
                {MESSAGE_CHANGE.format(op="'update'")}];
            RETURN QUERY SELECT m.id::text, iid, m.content::text, m.created_by::text, m.created_at::float8,
                array_to_json(done);
        END LOOP;
    END $$
    """,
]

GRANTS = [
    "REVOKE ALL ON public.messages FROM PUBLIC",
    "GRANT SELECT ON public.messages TO agentdesk_viewer, agentdesk_agent",
    "ALTER TABLE public.messages ENABLE ROW LEVEL SECURITY",
    "CREATE POLICY messages_read ON public.messages FOR SELECT "
    "USING (pg_has_role(session_user, 'agentdesk_viewer', 'MEMBER') OR EXISTS ("
    "SELECT 1 FROM public.agents a WHERE a.id = messages.agent_id AND a.written_login = session_user))",
    "REVOKE ALL ON FUNCTION public.agentdesk_send_message(text, text, text, text, text) FROM PUBLIC",
    "REVOKE ALL ON FUNCTION public.agentdesk_cancel_message(text, text, text) FROM PUBLIC",
    "REVOKE ALL ON FUNCTION public.agentdesk_take_messages(text, text, text) FROM PUBLIC",
    f"GRANT EXECUTE ON FUNCTION public.agentdesk_send_message(text, text, text, text, text) TO {OPERATORS}",
    f"GRANT EXECUTE ON FUNCTION public.agentdesk_cancel_message(text, text, text) TO {OPERATORS}",
    f"GRANT EXECUTE ON FUNCTION public.agentdesk_take_messages(text, text, text) TO agentdesk_agent, {OPERATORS}",
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
        'messages',
        sa.Column('id', sa.String(length=64), nullable=False),
        sa.Column('agent_id', sa.String(length=64), nullable=False),
        sa.Column('session_id', sa.String(length=64), nullable=False),
        sa.Column('content', sa.Text(), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.Column('created_by', sa.Text(), nullable=False),
        sa.Column('created_login', sa.Text(), nullable=True),
        sa.Column('settled_at', sa.Float(), nullable=True),
        sa.Column('settled_by', sa.Text(), nullable=True),
        sa.Column('item_id', sa.String(length=64), nullable=True),
        sa.Column('revision', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(['agent_id'], ['agents.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('messages_by_agent', 'messages', ['agent_id', 'status'], unique=False)
    op.create_index('messages_by_status', 'messages', ['status', 'created_at'], unique=False)
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for statement in [*FUNCTIONS, *GRANTS]:
        _run(bind, statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        for function in ("agentdesk_send_message(text, text, text, text, text)",
                         "agentdesk_cancel_message(text, text, text)", "agentdesk_take_messages(text, text, text)"):
            _run(bind, f"DROP FUNCTION IF EXISTS public.{function}")
    op.drop_index('messages_by_status', table_name='messages')
    op.drop_index('messages_by_agent', table_name='messages')
    op.drop_table('messages')
