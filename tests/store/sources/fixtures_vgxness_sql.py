# ruff: noqa: E501  (the schema and rows are verbatim text; their lines stay as published)
"""The vgxness fixture SQL: its migrations verbatim (seed 002, identical to reference §5.3).

`MIGRATIONS` are the runtime's own `*.sql` files in the order it applies them;
`REFERENCE_ROWS` is the reference's story (payload bodies inferred), verbatim, including
its `schema_migrations` rows. `fixtures_vgxness` adds generated volume.
"""

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ('001_initial.sql', r"""PRAGMA foreign_keys = ON;

CREATE TABLE IF NOT EXISTS schema_migrations (
  version TEXT PRIMARY KEY,
  applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE IF NOT EXISTS observations (
  id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  scope TEXT NOT NULL CHECK (scope IN ('project', 'personal')),
  type TEXT NOT NULL,
  title TEXT NOT NULL,
  content TEXT NOT NULL,
  topic_key TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

CREATE UNIQUE INDEX IF NOT EXISTS observations_topic_unique
  ON observations(project, scope, type, topic_key)
  WHERE topic_key IS NOT NULL;

CREATE INDEX IF NOT EXISTS observations_project_type_idx
  ON observations(project, type, updated_at DESC);

CREATE TABLE IF NOT EXISTS observation_revisions (
  id TEXT PRIMARY KEY,
  observation_id TEXT NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
  revision INTEGER NOT NULL,
  type TEXT NOT NULL,
  title TEXT NOT NULL,
  content TEXT NOT NULL,
  topic_key TEXT,
  created_at TEXT NOT NULL,
  UNIQUE(observation_id, revision)
);

CREATE INDEX IF NOT EXISTS observation_revisions_observation_revision_idx
  ON observation_revisions(observation_id, revision DESC);

CREATE VIRTUAL TABLE IF NOT EXISTS observations_fts USING fts5(
  title,
  content,
  content='observations',
  content_rowid='rowid'
);

CREATE TRIGGER IF NOT EXISTS observations_ai AFTER INSERT ON observations BEGIN
  INSERT INTO observations_fts(rowid, title, content)
  VALUES (new.rowid, new.title, new.content);
END;

CREATE TRIGGER IF NOT EXISTS observations_ad AFTER DELETE ON observations BEGIN
  INSERT INTO observations_fts(observations_fts, rowid, title, content)
  VALUES ('delete', old.rowid, old.title, old.content);
END;

CREATE TRIGGER IF NOT EXISTS observations_au AFTER UPDATE ON observations BEGIN
  INSERT INTO observations_fts(observations_fts, rowid, title, content)
  VALUES ('delete', old.rowid, old.title, old.content);
  INSERT INTO observations_fts(rowid, title, content)
  VALUES (new.rowid, new.title, new.content);
END;

CREATE TABLE IF NOT EXISTS sessions (
  id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  directory TEXT,
  started_at TEXT NOT NULL,
  ended_at TEXT,
  summary TEXT
);

CREATE INDEX IF NOT EXISTS sessions_project_started_idx
  ON sessions(project, started_at DESC);

CREATE TABLE IF NOT EXISTS session_activity (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  sequence INTEGER NOT NULL,
  actor TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('prompt', 'tool_call', 'artifact', 'summary', 'error')),
  payload_json TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE(session_id, sequence)
);

CREATE INDEX IF NOT EXISTS session_activity_session_sequence_idx
  ON session_activity(session_id, sequence);

CREATE TABLE IF NOT EXISTS artifacts (
  id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  topic_key TEXT NOT NULL,
  phase TEXT NOT NULL,
  content TEXT NOT NULL,
  observation_id TEXT NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE(project, topic_key)
);

CREATE INDEX IF NOT EXISTS artifacts_project_phase_idx
  ON artifacts(project, phase, updated_at DESC);

CREATE TABLE IF NOT EXISTS traces (
  id TEXT PRIMARY KEY,
  actor TEXT NOT NULL,
  session_id TEXT,
  operation TEXT NOT NULL,
  target_type TEXT NOT NULL,
  target_id TEXT,
  topic_key TEXT,
  status TEXT NOT NULL CHECK (status IN ('ok', 'error')),
  error_code TEXT,
  error_message TEXT,
  created_at TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS traces_operation_created_idx
  ON traces(operation, created_at DESC);

CREATE INDEX IF NOT EXISTS traces_target_idx
  ON traces(target_type, target_id);

CREATE INDEX IF NOT EXISTS traces_session_idx
  ON traces(session_id, created_at DESC);
"""),
    ('002_observation_revisions.sql', r"""CREATE TABLE IF NOT EXISTS observation_revisions (
  id TEXT PRIMARY KEY,
  observation_id TEXT NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
  revision INTEGER NOT NULL,
  type TEXT NOT NULL,
  title TEXT NOT NULL,
  content TEXT NOT NULL,
  topic_key TEXT,
  created_at TEXT NOT NULL,
  UNIQUE(observation_id, revision)
);

CREATE INDEX IF NOT EXISTS observation_revisions_observation_revision_idx
  ON observation_revisions(observation_id, revision DESC);
"""),
    ('003_agent_registry.sql', r"""CREATE TABLE IF NOT EXISTS agents (
  id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  scope TEXT NOT NULL CHECK (scope IN ('project', 'personal')),
  mode TEXT NOT NULL CHECK (mode IN ('agent', 'subagent')),
  name TEXT NOT NULL,
  description TEXT NOT NULL,
  instructions_json TEXT NOT NULL,
  capabilities_json TEXT NOT NULL,
  permissions_json TEXT NOT NULL,
  memory_json TEXT NOT NULL,
  workflows_json TEXT NOT NULL,
  skills_json TEXT NOT NULL,
  adapters_json TEXT NOT NULL,
  parent_agent_id TEXT REFERENCES agents(id) ON DELETE CASCADE,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE(project, scope, name),
  CHECK ((mode = 'agent' AND parent_agent_id IS NULL) OR (mode = 'subagent' AND parent_agent_id IS NOT NULL))
);

CREATE INDEX IF NOT EXISTS agents_project_scope_mode_idx
  ON agents(project, scope, mode, name);

CREATE INDEX IF NOT EXISTS agents_parent_idx
  ON agents(parent_agent_id, name);
"""),
    ('004_run_runtime.sql', r"""CREATE TABLE IF NOT EXISTS runs (
  id TEXT PRIMARY KEY,
  project TEXT NOT NULL,
  user_intent TEXT NOT NULL,
  workflow TEXT NOT NULL,
  phase TEXT NOT NULL,
  selected_agent_id TEXT NOT NULL,
  provider_adapter TEXT NOT NULL,
  model TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('created', 'planned', 'running', 'needs-human', 'completed', 'failed', 'blocked', 'cancelled')),
  outcome TEXT CHECK (outcome IN ('success', 'partial', 'failure', 'blocked', 'cancelled')),
  outcome_reason TEXT,
  latest_checkpoint_id TEXT REFERENCES run_checkpoints(id) ON DELETE SET NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  completed_at TEXT,
  CHECK (
    (status IN ('created', 'planned', 'running', 'needs-human') AND outcome IS NULL AND completed_at IS NULL)
    OR (status = 'completed' AND outcome IN ('success', 'partial') AND completed_at IS NOT NULL)
    OR (status = 'failed' AND outcome = 'failure' AND completed_at IS NOT NULL)
    OR (status = 'blocked' AND outcome = 'blocked' AND completed_at IS NOT NULL)
    OR (status = 'cancelled' AND outcome = 'cancelled' AND completed_at IS NOT NULL)
  )
);

CREATE INDEX IF NOT EXISTS runs_project_created_idx
  ON runs(project, created_at DESC);

CREATE INDEX IF NOT EXISTS runs_status_updated_idx
  ON runs(status, updated_at DESC);

CREATE TABLE IF NOT EXISTS run_events (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  sequence INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('timeline', 'evidence', 'memory-operation', 'artifact-reference', 'tool-call', 'permission-decision', 'operation-execution', 'approval', 'verification')),
  title TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  related_type TEXT,
  related_id TEXT,
  created_at TEXT NOT NULL,
  UNIQUE(run_id, sequence)
);

CREATE INDEX IF NOT EXISTS run_events_run_sequence_idx
  ON run_events(run_id, sequence);

CREATE INDEX IF NOT EXISTS run_events_related_idx
  ON run_events(related_type, related_id);

CREATE TABLE IF NOT EXISTS run_checkpoints (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  sequence INTEGER NOT NULL,
  label TEXT NOT NULL,
  state_json TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE(run_id, sequence)
);

CREATE INDEX IF NOT EXISTS run_checkpoints_run_sequence_idx
  ON run_checkpoints(run_id, sequence);
"""),
    ('005_run_approvals.sql', r"""CREATE TABLE IF NOT EXISTS run_approvals (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  decision_event_id TEXT NOT NULL REFERENCES run_events(id) ON DELETE CASCADE,
  status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'cancelled')),
  requested_at TEXT NOT NULL,
  resolved_at TEXT,
  resolved_by TEXT,
  resolution_reason TEXT,
  CHECK (
    (status = 'pending' AND resolved_at IS NULL AND resolved_by IS NULL AND resolution_reason IS NULL)
    OR (status IN ('approved', 'rejected', 'cancelled') AND resolved_at IS NOT NULL AND resolved_by IS NOT NULL)
  )
);

CREATE UNIQUE INDEX IF NOT EXISTS run_approvals_decision_event_idx
  ON run_approvals(decision_event_id);

CREATE INDEX IF NOT EXISTS run_approvals_run_status_idx
  ON run_approvals(run_id, status, requested_at DESC);
"""),
)

REFERENCE_ROWS = r"""INSERT INTO schema_migrations (version, applied_at) VALUES
  ('001_initial.sql', '2026-11-30T08:00:00.000Z'), ('002_observation_revisions.sql', '2026-11-30T08:00:00.000Z'),
  ('003_agent_registry.sql', '2026-11-30T08:00:00.000Z'), ('004_run_runtime.sql', '2026-11-30T08:00:00.000Z'),
  ('005_run_approvals.sql', '2026-11-30T08:00:00.000Z');

INSERT INTO agents (id, project, scope, mode, name, description, instructions_json, capabilities_json, permissions_json, memory_json,
                    workflows_json, skills_json, adapters_json, parent_agent_id, created_at, updated_at) VALUES
  ('agt_builder', 'acme-web', 'project', 'agent', 'builder', 'Implements changes', '["Follow the SDD workflow"]', '["edit","shell"]',
   '{"shell":"ask","edit":"allow"}', '{"scope":"project"}', '["sdd"]', '[]', '["claude-code"]', NULL, '2026-11-30T08:10:00.000Z', '2026-11-30T08:10:00.000Z'),
  ('agt_reviewer', 'acme-web', 'project', 'subagent', 'reviewer', 'Reviews diffs', '["Be strict"]', '["read"]',
   '{"shell":"deny"}', '{"scope":"project"}', '[]', '[]', '["claude-code"]', 'agt_builder', '2026-11-30T08:10:00.000Z', '2026-11-30T08:10:00.000Z');

INSERT INTO runs (id, project, user_intent, workflow, phase, selected_agent_id, provider_adapter, model, status, outcome, outcome_reason,
                  latest_checkpoint_id, created_at, updated_at, completed_at) VALUES
  ('run_1', 'acme-web', 'Upgrade eslint to v9', 'sdd', 'apply', 'agt_builder', 'claude-code', 'claude-sonnet', 'needs-human', NULL, NULL,
   NULL, '2026-11-30T09:00:00.000Z', '2026-11-30T09:04:00.000Z', NULL),
  ('run_2', 'acme-web', 'Fix typo in README', 'quick', 'verify', 'agt_builder', 'claude-code', 'claude-sonnet', 'completed', 'success', NULL,
   NULL, '2026-11-30T07:00:00.000Z', '2026-11-30T07:03:10.000Z', '2026-11-30T07:03:10.000Z'),
  ('run_3', 'acme-web', 'Bump node to 24', 'quick', 'apply', 'agt_builder', 'claude-code', 'claude-sonnet', 'failed', 'failure', 'tests failed after bump',
   NULL, '2026-11-30T06:00:00.000Z', '2026-11-30T06:09:00.000Z', '2026-11-30T06:09:00.000Z');

INSERT INTO run_events (id, run_id, sequence, kind, title, payload_json, related_type, related_id, created_at) VALUES
  ('rev_1_1', 'run_1', 1, 'timeline',            'Run planned',                    '{"phase":"plan"}', NULL, NULL, '2026-11-30T09:00:05.000Z'),
  ('rev_1_2', 'run_1', 2, 'tool-call',           'Bash: npm i -D eslint@9',        '{"tool":"Bash","args":{"command":"npm i -D eslint@9"}}', 'tool', 'Bash', '2026-11-30T09:03:50.000Z'),
  ('rev_1_3', 'run_1', 3, 'permission-decision', 'Shell command requires approval', '{"tool":"Bash","decision":"ask","args":{"command":"npm i -D eslint@9"}}', 'run_approval', 'apv_1', '2026-11-30T09:04:00.000Z'),
  ('rev_2_1', 'run_2', 1, 'tool-call',           'Edit README.md',                 '{"tool":"Edit","args":{"path":"README.md"}}', 'tool', 'Edit', '2026-11-30T07:01:00.000Z'),
  ('rev_2_2', 'run_2', 2, 'permission-decision', 'Edit requires approval',          '{"tool":"Edit","decision":"ask"}', 'run_approval', 'apv_2', '2026-11-30T07:01:01.000Z'),
  ('rev_2_3', 'run_2', 3, 'approval',            'Approved by ada',                '{"approval_id":"apv_2","status":"approved"}', 'run_approval', 'apv_2', '2026-11-30T07:02:00.000Z'),
  ('rev_2_4', 'run_2', 4, 'operation-execution', 'Edit applied',                   '{"tool":"Edit","ok":true}', 'tool', 'Edit', '2026-11-30T07:02:05.000Z'),
  ('rev_2_5', 'run_2', 5, 'verification',        'Markdown lint passed',           '{"ok":true}', NULL, NULL, '2026-11-30T07:03:10.000Z'),
  ('rev_3_1', 'run_3', 1, 'verification',        'npm test failed',                '{"ok":false,"exit_code":1}', NULL, NULL, '2026-11-30T06:08:59.000Z');

INSERT INTO run_checkpoints (id, run_id, sequence, label, state_json, created_at) VALUES
  ('chk_1_1', 'run_1', 1, 'before dependency upgrade', '{"git_head":"4be1c0d"}', '2026-11-30T09:03:45.000Z');
UPDATE runs SET latest_checkpoint_id = 'chk_1_1' WHERE id = 'run_1';

INSERT INTO run_approvals (id, run_id, decision_event_id, status, requested_at, resolved_at, resolved_by, resolution_reason) VALUES
  ('apv_1', 'run_1', 'rev_1_3', 'pending',  '2026-11-30T09:04:00.000Z', NULL, NULL, NULL),
  ('apv_2', 'run_2', 'rev_2_2', 'approved', '2026-11-30T07:01:01.000Z', '2026-11-30T07:02:00.000Z', 'ada', 'typo fix only');

INSERT INTO sessions (id, project, directory, started_at, ended_at, summary) VALUES
  ('ses_1', 'acme-web', '/home/ada/acme-web', '2026-11-30T06:55:00.000Z', '2026-11-30T07:05:00.000Z', 'Fixed README typo; eslint upgrade pending.'),
  ('ses_2', 'acme-web', '/home/ada/acme-web', '2026-11-30T08:58:00.000Z', NULL, NULL);
INSERT INTO session_activity (id, session_id, sequence, actor, kind, payload_json, created_at) VALUES
  ('act_1', 'ses_1', 1, 'ada',    'prompt',    '{"text":"fix the README typo"}', '2026-11-30T06:55:10.000Z'),
  ('act_2', 'ses_1', 2, 'claude', 'tool_call', '{"tool":"Edit","path":"README.md"}', '2026-11-30T07:01:00.000Z'),
  ('act_3', 'ses_1', 3, 'ada',    'summary',   '{"summary":"Fixed README typo; eslint upgrade pending."}', '2026-11-30T07:05:00.000Z'),
  ('act_4', 'ses_2', 1, 'ada',    'prompt',    '{"text":"upgrade eslint to v9"}', '2026-11-30T08:58:30.000Z');
INSERT INTO traces (id, actor, session_id, operation, target_type, target_id, topic_key, status, error_code, error_message, created_at) VALUES
  ('trc_1', 'claude', 'ses_1', 'observation.save',   'observation', 'obs_1', 'readme/typos', 'ok',    NULL, NULL, '2026-11-30T07:04:00.000Z'),
  ('trc_2', 'claude', 'ses_2', 'observation.search', 'observation', NULL,    NULL,           'error', 'validation_failed', 'empty query', '2026-11-30T08:59:00.000Z');

INSERT INTO observations (id, project, scope, type, title, content, topic_key, created_at, updated_at) VALUES
  ('obs_1', 'acme-web', 'project', 'decision', 'README typo policy', 'Typos in docs are fixed without a ticket.', 'readme/typos', '2026-11-30T07:04:00.000Z', '2026-11-30T07:04:00.000Z');
INSERT INTO observation_revisions (id, observation_id, revision, type, title, content, topic_key, created_at) VALUES
  ('obr_1', 'obs_1', 1, 'decision', 'README typo policy', 'Typos in docs are fixed without a ticket.', 'readme/typos', '2026-11-30T07:04:00.000Z');
INSERT INTO artifacts (id, project, topic_key, phase, content, observation_id, created_at, updated_at) VALUES
  ('art_1', 'acme-web', 'sdd/eslint-v9/proposal', 'proposal', '# Upgrade eslint to v9\n...', 'obs_1', '2026-11-30T09:01:00.000Z', '2026-11-30T09:01:00.000Z');
"""
