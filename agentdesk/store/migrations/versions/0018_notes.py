"""notes and labels: what an operator leaves on a span, a run or an approval for the next shift (issue 24)

Revision ID: 0018_notes
Revises: 0016_messages
Create Date: 2026-12-06 07:10:00

Both backends:

- `notes`: free text on one target (`target_kind` span | run | approval, `target_id`), the run it belongs to
  (`run_id`, so the tree marks a run without a join), who wrote it (`author`, the name typed; `author_login`,
  the server's login on PostgreSQL) and when, who changed it last, and a `revision` every edit compares and
  bumps. Several notes may sit on one target (one per person, or one per remark).
- `labels`: one row per (target, label), with who added it and when. Adding is a compare-and-set on the row
  being absent, removing on it being present.

PostgreSQL only: nobody below the owner writes either table directly; viewers (so operators and admins) read
them, agents do not. Operators write through SECURITY DEFINER functions, each one transaction step with its
compare-and-set, its audit record (`note.add`, `note.edit`, `note.remove`, `label.add`, `label.remove`) and its
change-log row, refusing an agent or a viewer in one sentence:

- `agentdesk_note_add(note_id, kind, target_id, body, actor, written_at, origin)` (`written_at`: NULL for
  now, or when an imported note was first written, never later than now; the audit has both)
- `agentdesk_note_edit(note_id, body, expected_revision, actor, origin)`
- `agentdesk_note_remove(note_id, expected_revision, actor, origin)`
- `agentdesk_label_add(kind, target_id, label, actor, written_at, origin)`
- `agentdesk_label_remove(kind, target_id, label, actor, origin)`

Each answers `(outcome, revision, who, at, changes)`: outcome `ok`, `not found` (no such target or note),
`exists` (the note id or the label is there already; who and when), `stale` (the note moved on; its revision,
who and when), `absent` (no such label to remove). The server refuses text over 1,000,000 bytes and labels
that are empty, over 64 characters, or hold control, format or separator characters other than the space.

The SQL is written out here, not imported, so the revision stays what it was when later code changes.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0018_notes'
down_revision = '0016_messages'
branch_labels = None
depends_on = None

SAFE = "SET search_path = pg_catalog, pg_temp"
GROUPS = "agentdesk_viewer, agentdesk_operator, agentdesk_admin, agentdesk_agent"
MAX_NOTE_BYTES = 1_000_000
BAD_LABEL = ("[\\x01-\\x1f\\x7f-\\xa0\\u00ad\\u061c\\u1680\\u180e\\u2000-\\u200f\\u2028-\\u202f"
             "\\u205f-\\u206f\\u3000\\ufeff\\ufff9-\\ufffb\\U000e0000-\\U000e007f]")
"""Characters no label may hold (a server-side floor; the client refuses every control, format and separator
character but the space): C0/C1 controls, no-break and other spaces, bidi controls, zero-width characters,
line/paragraph separators, tag characters."""

TARGET_KINDS = "('span', 'run', 'approval')"

HELPERS = [
    # The run a target belongs to (NULL: no such target), and the change-log parents of that run.
    f"""
    CREATE FUNCTION public.agentdesk_note_target_run(kind text, target_id text) RETURNS text
    LANGUAGE sql STABLE {SAFE} AS $$
        SELECT CASE kind
            WHEN 'run' THEN (SELECT r.id FROM public.runs r WHERE r.id = target_id)
            WHEN 'span' THEN (SELECT s.run_id FROM public.spans s WHERE s.id = target_id)
            WHEN 'approval' THEN (SELECT a.run_id FROM public.approvals a WHERE a.id = target_id)
        END
    $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_note_parents(run_id text, kind text, target_id text) RETURNS text
    LANGUAGE sql STABLE {SAFE} AS $$
        SELECT json_build_object('project', r.project_id, 'task', r.task_id, 'session', r.session_id,
                                 'agent', r.agent_id, 'run', r.id, 'target', kind || ':' || target_id)::text
        FROM public.runs r WHERE r.id = run_id
    $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_note_check(actor text, kind text, body text, label text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE {SAFE} AS $$
    BEGIN
        IF actor IS NULL OR btrim(actor) = '' OR length(actor) > 2000 THEN
            RAISE EXCEPTION 'a note or label needs an actor name of at most 2,000 characters'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF kind IS NOT NULL AND kind NOT IN {TARGET_KINDS} THEN
            RAISE EXCEPTION 'notes and labels go on a span, a run or an approval, not %', kind
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF body IS NOT NULL AND octet_length(body) > {MAX_NOTE_BYTES} THEN
            RAISE EXCEPTION 'the note is % bytes; the limit is {MAX_NOTE_BYTES:,} bytes', octet_length(body)
                USING ERRCODE = 'program_limit_exceeded';
        END IF;
        IF label IS NOT NULL AND (label = '' OR length(label) > 64 OR label <> btrim(label)
                                  OR label ~ '{BAD_LABEL}') THEN
            RAISE EXCEPTION 'a label is 1 to 64 characters with no control, format or separator characters'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END $$
    """,
]

FUNCTIONS = [
    # When an imported note or label was first written (its export says): never later than now.
    f"""
    CREATE FUNCTION public.agentdesk_note_written(written_at float8, now_at float8) RETURNS void
    LANGUAGE plpgsql IMMUTABLE {SAFE} AS $$
    BEGIN
        IF written_at IS NOT NULL AND (written_at > now_at OR written_at < 0 OR written_at = 'NaN'::float8) THEN
            RAISE EXCEPTION 'a note or label cannot have been written in the future or before 1970'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_note_add(note_id text, kind text, target_id text, body text, actor text,
                                              written_at float8, origin text)
    RETURNS TABLE (outcome text, revision int, who text, at float8, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        run text;
        now_at float8;
        n public.notes;
    BEGIN
        PERFORM public.agentdesk_require('operator', 'writing a note');
        PERFORM public.agentdesk_note_check(actor, coalesce(kind, ''), coalesce(body, ''), NULL);
        IF note_id IS NULL OR note_id = '' OR length(note_id) > 64 THEN
            RAISE EXCEPTION 'a note needs an id of at most 64 characters' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM public.agentdesk_writer_turn(false);
        now_at := public.agentdesk_now();
        PERFORM public.agentdesk_note_written(written_at, now_at);
        SELECT * INTO n FROM public.notes x WHERE x.id = note_id;
        IF FOUND THEN
            RETURN QUERY SELECT 'exists'::text, n.revision, n.author, n.created_at, NULL::json;
            RETURN;
        END IF;
        run := public.agentdesk_note_target_run(kind, target_id);
        IF run IS NULL THEN
            RETURN QUERY SELECT 'not found'::text, NULL::int, NULL::text, NULL::float8, NULL::json;
            RETURN;
        END IF;
        INSERT INTO public.notes (id, target_kind, target_id, run_id, body, author, author_login, created_at,
                                  updated_at, updated_by, revision)
            VALUES (note_id, kind, target_id, run, body, actor, session_user, coalesce(written_at, now_at),
                    coalesce(written_at, now_at), actor, 1);
        PERFORM public.agentdesk_audit_write(public.agentdesk_py_float(now_at), actor, 'note.add', 'note', note_id,
            json_build_object('target', kind, 'target_id', target_id, 'run', run, 'bytes', octet_length(body),
                              'text_hash', 'sha256:' || encode(sha256(convert_to(body, 'UTF8')), 'hex'),
                              'written_at', written_at)::text);
        RETURN QUERY SELECT 'ok'::text, 1, actor, now_at, json_build_array(public.agentdesk_change(
            now_at, origin, 'note', 'insert', note_id, public.agentdesk_note_parents(run, kind, target_id), 1));
    END $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_note_edit(note_id text, body text, expected_revision int, actor text,
                                               origin text)
    RETURNS TABLE (outcome text, revision int, who text, at float8, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        now_at float8;
        n public.notes;
    BEGIN
        PERFORM public.agentdesk_require('operator', 'editing a note');
        PERFORM public.agentdesk_note_check(actor, NULL, coalesce(body, ''), NULL);
        IF body IS NULL OR expected_revision IS NULL THEN
            RAISE EXCEPTION 'editing a note needs its text and the expected revision'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM public.agentdesk_writer_turn(false);
        now_at := public.agentdesk_now();
        SELECT * INTO n FROM public.notes x WHERE x.id = note_id FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::int, NULL::text, NULL::float8, NULL::json;
            RETURN;
        END IF;
        IF n.revision <> expected_revision THEN
            RETURN QUERY SELECT 'stale'::text, n.revision, n.updated_by, n.updated_at, NULL::json;
            RETURN;
        END IF;
        UPDATE public.notes x SET body = agentdesk_note_edit.body, updated_at = now_at, updated_by = actor,
            updated_login = session_user, revision = n.revision + 1 WHERE x.id = note_id;
        PERFORM public.agentdesk_audit_write(public.agentdesk_py_float(now_at), actor, 'note.edit', 'note', note_id,
            json_build_object('before_revision', n.revision, 'bytes', octet_length(body),
                              'text_hash', 'sha256:' || encode(sha256(convert_to(body, 'UTF8')), 'hex'))::text);
        RETURN QUERY SELECT 'ok'::text, n.revision + 1, actor, now_at, json_build_array(public.agentdesk_change(
            now_at, origin, 'note', 'update', note_id,
            public.agentdesk_note_parents(n.run_id, n.target_kind, n.target_id), n.revision + 1));
    END $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_note_remove(note_id text, expected_revision int, actor text, origin text)
    RETURNS TABLE (outcome text, revision int, who text, at float8, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        now_at float8;
        n public.notes;
    BEGIN
        PERFORM public.agentdesk_require('operator', 'removing a note');
        PERFORM public.agentdesk_note_check(actor, NULL, NULL, NULL);
        IF expected_revision IS NULL THEN
            RAISE EXCEPTION 'removing a note needs the expected revision' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM public.agentdesk_writer_turn(false);
        now_at := public.agentdesk_now();
        SELECT * INTO n FROM public.notes x WHERE x.id = note_id FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'not found'::text, NULL::int, NULL::text, NULL::float8, NULL::json;
            RETURN;
        END IF;
        IF n.revision <> expected_revision THEN
            RETURN QUERY SELECT 'stale'::text, n.revision, n.updated_by, n.updated_at, NULL::json;
            RETURN;
        END IF;
        DELETE FROM public.notes x WHERE x.id = note_id;
        PERFORM public.agentdesk_audit_write(public.agentdesk_py_float(now_at), actor, 'note.remove', 'note',
            note_id, json_build_object('before_revision', n.revision, 'target', n.target_kind,
                                       'target_id', n.target_id, 'run', n.run_id)::text);
        RETURN QUERY SELECT 'ok'::text, n.revision + 1, actor, now_at, json_build_array(public.agentdesk_change(
            now_at, origin, 'note', 'delete', note_id,
            public.agentdesk_note_parents(n.run_id, n.target_kind, n.target_id), n.revision + 1));
    END $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_label_add(kind text, target_id text, label text, actor text,
                                               written_at float8, origin text)
    RETURNS TABLE (outcome text, revision int, who text, at float8, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        run text;
        now_at float8;
        l public.labels;
        key text := kind || ':' || target_id || ':' || label;
    BEGIN
        PERFORM public.agentdesk_require('operator', 'labelling');
        PERFORM public.agentdesk_note_check(actor, coalesce(kind, ''), NULL, coalesce(label, ''));
        PERFORM public.agentdesk_writer_turn(false);
        now_at := public.agentdesk_now();
        PERFORM public.agentdesk_note_written(written_at, now_at);
        SELECT * INTO l FROM public.labels x WHERE x.target_kind = kind AND x.target_id = target_id
                                              AND x.label = label;
        IF FOUND THEN
            RETURN QUERY SELECT 'exists'::text, NULL::int, l.author, l.created_at, NULL::json;
            RETURN;
        END IF;
        run := public.agentdesk_note_target_run(kind, target_id);
        IF run IS NULL THEN
            RETURN QUERY SELECT 'not found'::text, NULL::int, NULL::text, NULL::float8, NULL::json;
            RETURN;
        END IF;
        INSERT INTO public.labels (target_kind, target_id, label, run_id, author, author_login, created_at)
            VALUES (kind, target_id, label, run, actor, session_user, coalesce(written_at, now_at));
        PERFORM public.agentdesk_audit_write(public.agentdesk_py_float(now_at), actor, 'label.add', 'label', key,
            json_build_object('target', kind, 'target_id', target_id, 'label', label, 'run', run,
                              'written_at', written_at)::text);
        RETURN QUERY SELECT 'ok'::text, NULL::int, actor, now_at, json_build_array(public.agentdesk_change(
            now_at, origin, 'label', 'insert', key, public.agentdesk_note_parents(run, kind, target_id), NULL));
    END $$
    """,
    f"""
    CREATE FUNCTION public.agentdesk_label_remove(kind text, target_id text, label text, actor text, origin text)
    RETURNS TABLE (outcome text, revision int, who text, at float8, changes json)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER {SAFE} AS $$
    #variable_conflict use_variable
    DECLARE
        now_at float8;
        l public.labels;
        key text := kind || ':' || target_id || ':' || label;
    BEGIN
        PERFORM public.agentdesk_require('operator', 'removing a label');
        PERFORM public.agentdesk_note_check(actor, coalesce(kind, ''), NULL, NULL);
        PERFORM public.agentdesk_writer_turn(false);
        now_at := public.agentdesk_now();
        SELECT * INTO l FROM public.labels x WHERE x.target_kind = kind AND x.target_id = target_id
                                              AND x.label = label FOR UPDATE;
        IF NOT FOUND THEN
            IF public.agentdesk_note_target_run(kind, target_id) IS NULL THEN
                RETURN QUERY SELECT 'not found'::text, NULL::int, NULL::text, NULL::float8, NULL::json;
            ELSE
                RETURN QUERY SELECT 'absent'::text, NULL::int, NULL::text, NULL::float8, NULL::json;
            END IF;
            RETURN;
        END IF;
        DELETE FROM public.labels x WHERE x.target_kind = kind AND x.target_id = target_id AND x.label = label;
        PERFORM public.agentdesk_audit_write(public.agentdesk_py_float(now_at), actor, 'label.remove', 'label', key,
            json_build_object('target', kind, 'target_id', target_id, 'label', label, 'run', l.run_id,
                              'added_by', l.author)::text);
        RETURN QUERY SELECT 'ok'::text, NULL::int, actor, now_at, json_build_array(public.agentdesk_change(
            now_at, origin, 'label', 'delete', key, public.agentdesk_note_parents(l.run_id, kind, target_id),
            NULL));
    END $$
    """,
]

WRITERS = ("agentdesk_note_add(text, text, text, text, text, float8, text)",
           "agentdesk_note_edit(text, text, int, text, text)",
           "agentdesk_note_remove(text, int, text, text)",
           "agentdesk_label_add(text, text, text, text, float8, text)",
           "agentdesk_label_remove(text, text, text, text, text)")
INTERNAL = ("agentdesk_note_target_run(text, text)", "agentdesk_note_parents(text, text, text)",
            "agentdesk_note_check(text, text, text, text)", "agentdesk_note_written(float8, float8)")

GRANTS = [
    f"REVOKE ALL ON public.notes, public.labels FROM PUBLIC, {GROUPS}",
    "GRANT SELECT ON public.notes, public.labels TO agentdesk_viewer",
    *(f"REVOKE ALL ON FUNCTION public.{f} FROM PUBLIC, {GROUPS}" for f in (*WRITERS, *INTERNAL)),
    # Operators (so admins) call them; an agent or a viewer is refused by PostgreSQL before the body runs.
    *(f"GRANT EXECUTE ON FUNCTION public.{f} TO agentdesk_operator" for f in WRITERS),
]


def _run(bind: sa.Connection, statement: str) -> None:
    """One statement through the driver, no parameters: function bodies hold % and : that must stay as written."""
    cursor = bind.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(statement)
    finally:
        cursor.close()


def upgrade() -> None:
    op.create_table('notes',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('target_kind', sa.String(length=16), nullable=False),
    sa.Column('target_id', sa.String(length=64), nullable=False),
    sa.Column('run_id', sa.String(length=64), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('author', sa.Text(), nullable=False),
    sa.Column('author_login', sa.Text(), nullable=True),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('updated_at', sa.Float(), nullable=False),
    sa.Column('updated_by', sa.Text(), nullable=False),
    sa.Column('updated_login', sa.Text(), nullable=True),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('notes_by_target', 'notes', ['target_kind', 'target_id'], unique=False)
    op.create_index('notes_by_run', 'notes', ['run_id'], unique=False)
    op.create_index('notes_by_time', 'notes', ['updated_at'], unique=False)
    op.create_table('labels',
    sa.Column('target_kind', sa.String(length=16), nullable=False),
    sa.Column('target_id', sa.String(length=64), nullable=False),
    sa.Column('label', sa.String(length=64), nullable=False),
    sa.Column('run_id', sa.String(length=64), nullable=False),
    sa.Column('author', sa.Text(), nullable=False),
    sa.Column('author_login', sa.Text(), nullable=True),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('target_kind', 'target_id', 'label')
    )
    op.create_index('labels_by_run', 'labels', ['run_id'], unique=False)
    op.create_index('labels_by_time', 'labels', ['created_at'], unique=False)
    op.create_index('labels_by_label', 'labels', ['label'], unique=False)
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for statement in [*HELPERS, *FUNCTIONS, *GRANTS]:
        _run(bind, statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        for function in (*WRITERS, *INTERNAL[::-1]):
            _run(bind, f"DROP FUNCTION IF EXISTS public.{function}")
    op.drop_table('labels')
    op.drop_table('notes')
