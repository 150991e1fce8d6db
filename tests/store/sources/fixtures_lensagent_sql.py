# ruff: noqa: E501  (the schema and rows are verbatim text; their lines stay as published)
"""The lensagent schema and story of the developer reference (§5.1), verbatim, and the 0.1.0 schema.

`DDL_0_1_2` is the `schema` string of `@lensagent/core` 0.1.2 (`dist/store/schema.d.ts`),
decoded verbatim from seed 000; the reference's §5.1 DDL is the same text. `ROWS_0_1_2` are
§5.1's fixture rows, verbatim (values illustrative; JSON bodies inferred by the reference).

`ddl_0_1_0()` derives the 0.1.0 schema the way the reference describes the change: drop the
0.1.2 column additions (workspaces, model_attempts, calls, results) and the five new tables
(todo_reminder_state, working_context_items + its index, working_contexts,
context_compactions, purge_cleanups). The result equals seed 000's 0.1.0 `schema` string
(checked by a test when the seed is reachable).
"""

from __future__ import annotations

import re

DDL_0_1_2 = r"""
PRAGMA foreign_keys = ON;
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
PRAGMA busy_timeout = 5000;

CREATE TABLE IF NOT EXISTS instance (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  epoch TEXT NOT NULL,
  state_revision INTEGER NOT NULL CHECK (state_revision >= 0),
  created_at TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS projects (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  archived_at TEXT,
  revision INTEGER NOT NULL CHECK (revision >= 0),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS workspaces (
  executor_ref TEXT,
  executor_id TEXT NOT NULL DEFAULT 'remote' CHECK (executor_id IN ('local', 'remote')),
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  is_default INTEGER NOT NULL CHECK (is_default IN (0, 1)),
  revision INTEGER NOT NULL CHECK (revision >= 0),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE(project_id, name)
) STRICT;
CREATE UNIQUE INDEX IF NOT EXISTS workspace_default ON workspaces(project_id) WHERE is_default = 1;

CREATE TABLE IF NOT EXISTS workspace_paths (
  workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL CHECK (ordinal >= 0),
  path TEXT NOT NULL,
  PRIMARY KEY(workspace_id, ordinal),
  UNIQUE(workspace_id, path)
) STRICT;

CREATE TABLE IF NOT EXISTS tasks (
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  title TEXT NOT NULL,
  archived_at TEXT,
  revision INTEGER NOT NULL CHECK (revision >= 0),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS sessions (
  id TEXT PRIMARY KEY,
  task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
  title TEXT NOT NULL,
  archived_at TEXT,
  revision INTEGER NOT NULL CHECK (revision >= 0),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS agents (
  id TEXT PRIMARY KEY,
  task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE RESTRICT,
  parent_agent_id TEXT REFERENCES agents(id) ON DELETE SET NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('IDLE', 'RUNNING', 'WAITING', 'STOPPED')),
  model TEXT NOT NULL,
  model_reasoning_effort TEXT NOT NULL,
  policy_preset TEXT NOT NULL,
  context_revision INTEGER NOT NULL CHECK (context_revision >= 0),
  revision INTEGER NOT NULL CHECK (revision >= 0),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS messages (
  id TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
  source_agent_id TEXT REFERENCES agents(id) ON DELETE SET NULL,
  role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
  content TEXT NOT NULL,
  metadata_json TEXT,
  created_at TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS pending_messages (
  id TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
  message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
  source_agent_id TEXT REFERENCES agents(id) ON DELETE SET NULL,
  content TEXT NOT NULL,
  ordinal INTEGER NOT NULL CHECK (ordinal >= 0),
  revision INTEGER NOT NULL CHECK (revision >= 0),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE(agent_id, ordinal)
) STRICT;

CREATE TABLE IF NOT EXISTS runs (
  id TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
  goal_message_ids_json TEXT NOT NULL DEFAULT '[]',
  initial_step_pending INTEGER NOT NULL DEFAULT 0 CHECK (initial_step_pending IN (0, 1)),
  state TEXT NOT NULL CHECK (state IN ('READY', 'RUNNING', 'WAITING', 'TERMINAL')),
  outcome TEXT CHECK (outcome IN ('success', 'failed', 'cancelled', 'interrupted')),
  error_code TEXT,
  revision INTEGER NOT NULL CHECK (revision >= 0),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS steps (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  turn_group_id TEXT NOT NULL REFERENCES context_turn_groups(id) ON DELETE RESTRICT,
  ordinal INTEGER NOT NULL CHECK (ordinal >= 0),
  state TEXT NOT NULL CHECK (state IN ('RUNNING', 'WAITING', 'TERMINAL')),
  outcome TEXT CHECK (outcome IN ('success', 'failed', 'cancelled', 'interrupted')),
  error_code TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE(run_id, ordinal)
) STRICT;

CREATE TABLE IF NOT EXISTS model_attempts (
  id TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
  step_id TEXT REFERENCES steps(id) ON DELETE CASCADE,
  kind TEXT NOT NULL CHECK (kind IN ('agent', 'compaction')),
  sequence INTEGER NOT NULL CHECK (sequence >= 0),
  model TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('PREPARED', 'RUNNING', 'TERMINAL')),
  outcome TEXT CHECK (outcome IN ('success', 'failed', 'cancelled', 'interrupted')),
  profile_id TEXT NOT NULL,
  profile_version INTEGER NOT NULL CHECK (profile_version >= 1),
  profile_digest TEXT NOT NULL,
  config_digest TEXT NOT NULL,
  context_revision INTEGER NOT NULL CHECK (context_revision >= 0),
  request_digest TEXT NOT NULL,
  request_json TEXT,
  observation_json TEXT,
  preparation_json TEXT NOT NULL,
  usage_json TEXT,
  error_code TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE(agent_id, kind, sequence)
) STRICT;

CREATE TABLE IF NOT EXISTS attempt_capabilities (
  attempt_id TEXT NOT NULL REFERENCES model_attempts(id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL CHECK (ordinal >= 0),
  capability_id TEXT NOT NULL,
  schema_json TEXT NOT NULL,
  PRIMARY KEY(attempt_id, ordinal),
  UNIQUE(attempt_id, capability_id)
) STRICT;

CREATE TABLE IF NOT EXISTS attempt_tool_ordinals (
  attempt_id TEXT NOT NULL REFERENCES model_attempts(id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL CHECK (ordinal >= 0),
  provider_tool_id TEXT,
  complete INTEGER NOT NULL CHECK (complete IN (0, 1)),
  PRIMARY KEY(attempt_id, ordinal)
) STRICT;

CREATE TABLE IF NOT EXISTS call_partitions (
  id TEXT PRIMARY KEY,
  step_id TEXT NOT NULL REFERENCES steps(id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL CHECK (ordinal >= 0),
  mode TEXT NOT NULL CHECK (mode IN ('parallel', 'serial')),
  created_at TEXT NOT NULL,
  UNIQUE(step_id, ordinal)
) STRICT;

CREATE TABLE IF NOT EXISTS calls (
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE RESTRICT,
  agent_id TEXT REFERENCES agents(id) ON DELETE SET NULL,
  step_id TEXT REFERENCES steps(id) ON DELETE CASCADE,
  attempt_id TEXT REFERENCES model_attempts(id) ON DELETE CASCADE,
  partition_id TEXT REFERENCES call_partitions(id) ON DELETE CASCADE,
  parent_call_id TEXT REFERENCES calls(id) ON DELETE CASCADE,
  source TEXT NOT NULL CHECK (source IN ('user', 'llm', 'program')),
  capability_id TEXT NOT NULL,
  provider_call_id TEXT,
  call_ordinal INTEGER CHECK (call_ordinal >= 0),
  input_json TEXT NOT NULL,
  continuation_json TEXT,
  effect TEXT NOT NULL CHECK (effect IN ('read_only', 'workspace_write', 'external', 'full')),
  policy TEXT CHECK (policy IN ('read_only', 'workspace_write', 'external', 'ask', 'auto_approve', 'full_access')),
  state TEXT NOT NULL CHECK (state IN ('WAITING', 'QUEUED', 'RUNNING', 'TERMINAL')),
  wait_reason TEXT CHECK (wait_reason IN ('user_input', 'policy_review')),
  outcome TEXT CHECK (outcome IN ('success', 'failed', 'cancelled', 'interrupted')),
  outcome_unknown INTEGER NOT NULL CHECK (outcome_unknown IN (0, 1)),
  auto_review_passed INTEGER CHECK (auto_review_passed IN (0, 1)),
  auto_review_json TEXT,
  revision INTEGER NOT NULL CHECK (revision >= 0),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE(attempt_id, call_ordinal)
) STRICT;
CREATE UNIQUE INDEX IF NOT EXISTS calls_by_provider_call ON calls(attempt_id, provider_call_id) WHERE provider_call_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS results (
  capture TEXT NOT NULL DEFAULT 'unknown' CHECK (capture IN ('complete', 'partial', 'unknown')),
  stored TEXT NOT NULL DEFAULT 'unknown' CHECK (stored IN ('full', 'unknown')),
  id TEXT PRIMARY KEY,
  call_id TEXT NOT NULL UNIQUE REFERENCES calls(id) ON DELETE CASCADE,
  outcome TEXT NOT NULL CHECK (outcome IN ('success', 'failed', 'cancelled', 'interrupted')),
  content_json TEXT NOT NULL,
  truncated INTEGER NOT NULL DEFAULT 0 CHECK (truncated IN (0, 1)),
  error_code TEXT,
  error_message TEXT,
  created_at TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS artifacts (
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  media_type TEXT NOT NULL,
  relative_path TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  size_bytes INTEGER NOT NULL CHECK (size_bytes >= 0),
  created_at TEXT NOT NULL
) STRICT;
CREATE UNIQUE INDEX IF NOT EXISTS artifact_identity ON artifacts(project_id, sha256, name, media_type);
CREATE INDEX IF NOT EXISTS artifacts_by_path ON artifacts(relative_path);

CREATE TABLE IF NOT EXISTS result_artifacts (
  result_id TEXT NOT NULL REFERENCES results(id) ON DELETE CASCADE,
  artifact_id TEXT NOT NULL REFERENCES artifacts(id) ON DELETE RESTRICT,
  PRIMARY KEY(result_id, artifact_id)
) STRICT;

-- No table for edit_file/patch_file file history: it belongs to the Executor, which owns the files
-- and therefore the only authoritative view of what they contained. Core keeps Call semantics and
-- asks the Executor to revert by call_id. See
-- docs/architecture/harness-level3/09-file-snapshot-storage-decision.md.

CREATE TABLE IF NOT EXISTS context_turn_groups (
  id TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL CHECK (ordinal >= 0),
  kind TEXT NOT NULL CHECK (kind IN ('turn', 'compaction', 'included', 'ledger')),
  state TEXT NOT NULL CHECK (state IN ('OPEN', 'COMPLETE', 'ABORTED')),
  revision INTEGER NOT NULL CHECK (revision >= 0),
  created_at TEXT NOT NULL,
  completed_at TEXT,
  UNIQUE(agent_id, ordinal)
) STRICT;

CREATE TABLE IF NOT EXISTS context_items (
  id TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
  turn_group_id TEXT NOT NULL REFERENCES context_turn_groups(id) ON DELETE CASCADE,
  turn_group_ordinal INTEGER NOT NULL CHECK (turn_group_ordinal >= 0),
  kind TEXT NOT NULL CHECK (kind IN ('message', 'tool_calls', 'result', 'compaction')),
  source_id TEXT NOT NULL,
  role TEXT CHECK (role IN ('system', 'user', 'assistant', 'tool')),
  content TEXT NOT NULL,
  tool_call_id TEXT,
  tool_name TEXT,
  ordinal INTEGER NOT NULL CHECK (ordinal >= 0),
  visible INTEGER NOT NULL CHECK (visible IN (0, 1)),
  locked INTEGER NOT NULL CHECK (locked IN (0, 1)),
  revision INTEGER NOT NULL CHECK (revision >= 0),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE(agent_id, ordinal),
  UNIQUE(turn_group_id, turn_group_ordinal)
) STRICT;

CREATE TABLE IF NOT EXISTS context_overrides (
  id TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
  target_kind TEXT NOT NULL CHECK (target_kind IN ('agent', 'message', 'result', 'artifact')),
  target_id TEXT NOT NULL,
  instructions TEXT NOT NULL,
  revision INTEGER NOT NULL CHECK (revision >= 0),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE(agent_id, target_kind, target_id)
) STRICT;

CREATE TABLE IF NOT EXISTS todo_reminder_state (
  agent_id TEXT PRIMARY KEY REFERENCES agents(id) ON DELETE CASCADE,
  last_context_rowid INTEGER NOT NULL DEFAULT 0,
  pending_tokens INTEGER NOT NULL DEFAULT 0 CHECK (pending_tokens >= 0)
) STRICT;

CREATE TABLE IF NOT EXISTS working_context_items (
  context_item_id TEXT PRIMARY KEY REFERENCES context_items(id) ON DELETE CASCADE,
  agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
  source_revision INTEGER NOT NULL,
  content TEXT NOT NULL,
  snipped INTEGER NOT NULL DEFAULT 0 CHECK (snipped IN (0, 1))
) STRICT;
CREATE INDEX IF NOT EXISTS working_context_agent ON working_context_items(agent_id);

CREATE TABLE IF NOT EXISTS working_contexts (
  agent_id TEXT PRIMARY KEY REFERENCES agents(id) ON DELETE CASCADE,
  source_revision INTEGER NOT NULL,
  revision INTEGER NOT NULL,
  digest TEXT NOT NULL,
  prefixes_json TEXT NOT NULL DEFAULT '[]',
  messages_json TEXT,
  request_frame_json TEXT,
  updated_at TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS context_compactions (
  context_item_id TEXT PRIMARY KEY REFERENCES context_items(id) ON DELETE CASCADE,
  source_revision INTEGER NOT NULL,
  covered_item_ids_json TEXT NOT NULL,
  focus TEXT
) STRICT;

CREATE TABLE IF NOT EXISTS projection_decisions (
  id TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
  attempt_id TEXT REFERENCES model_attempts(id) ON DELETE CASCADE,
  stage TEXT NOT NULL,
  source_tokens INTEGER NOT NULL CHECK (source_tokens >= 0),
  projected_tokens INTEGER NOT NULL CHECK (projected_tokens >= 0),
  details_json TEXT NOT NULL,
  created_at TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS capability_assignments (
  agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
  capability_id TEXT NOT NULL,
  policy TEXT NOT NULL CHECK (policy IN ('read_only', 'workspace_write', 'external', 'ask', 'auto_approve', 'full_access')),
  assigned_at TEXT NOT NULL,
  PRIMARY KEY(agent_id, capability_id)
) STRICT;

CREATE TABLE IF NOT EXISTS capability_loads (
  agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
  capability_id TEXT NOT NULL,
  loaded_at TEXT NOT NULL,
  PRIMARY KEY(agent_id, capability_id),
  FOREIGN KEY(agent_id, capability_id) REFERENCES capability_assignments(agent_id, capability_id) ON DELETE CASCADE
) STRICT;

CREATE TABLE IF NOT EXISTS agent_plans (
  agent_id TEXT PRIMARY KEY REFERENCES agents(id) ON DELETE CASCADE,
  items_json TEXT NOT NULL,
  revision INTEGER NOT NULL CHECK (revision >= 0),
  updated_at TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS ingress_requests (
  client_id TEXT NOT NULL,
  key TEXT NOT NULL,
  operation TEXT NOT NULL,
  request_digest TEXT NOT NULL,
  response_json TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY(client_id, key)
) STRICT;

CREATE TABLE IF NOT EXISTS side_effect_ledgers (
  id TEXT PRIMARY KEY,
  step_id TEXT NOT NULL REFERENCES steps(id) ON DELETE CASCADE,
  content TEXT NOT NULL,
  created_at TEXT NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS purge_cleanups (
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL REFERENCES projects(id),
  executor_state_id TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  created_at TEXT NOT NULL
) STRICT;

CREATE INDEX IF NOT EXISTS tasks_by_project ON tasks(project_id, archived_at, updated_at DESC);
CREATE INDEX IF NOT EXISTS sessions_by_task ON sessions(task_id, archived_at, updated_at DESC);
CREATE INDEX IF NOT EXISTS agents_by_session ON agents(session_id, parent_agent_id, created_at);
CREATE INDEX IF NOT EXISTS pending_by_agent ON pending_messages(agent_id, ordinal);
CREATE INDEX IF NOT EXISTS runs_by_agent ON runs(agent_id, created_at DESC);
CREATE UNIQUE INDEX IF NOT EXISTS one_live_run_per_agent ON runs(agent_id) WHERE state != 'TERMINAL';
CREATE INDEX IF NOT EXISTS attempts_by_step ON model_attempts(step_id, sequence);
CREATE INDEX IF NOT EXISTS calls_by_project ON calls(project_id, state, created_at DESC);
CREATE INDEX IF NOT EXISTS context_by_agent ON context_items(agent_id, ordinal);
CREATE INDEX IF NOT EXISTS artifacts_by_project ON artifacts(project_id, created_at DESC);
"""

ROWS_0_1_2 = r"""-- ===== Fixture rows (values illustrative; JSON bodies of usage_json / auto_review_json / preparation_json [inferred]) =====
INSERT INTO instance (id, epoch, state_revision, created_at) VALUES
  (1, 'ep_2026-11-30T09:00:00.000Z', 57, '2026-11-30T09:00:00.000Z');

INSERT INTO projects (id, name, archived_at, revision, created_at, updated_at) VALUES
  ('prj_demo', 'demo-service', NULL, 1, '2026-11-30T09:00:01.000Z', '2026-11-30T09:00:01.000Z');

INSERT INTO workspaces (executor_ref, executor_id, id, project_id, name, is_default, revision, created_at, updated_at) VALUES
  (NULL, 'local', 'wsp_main', 'prj_demo', 'main', 1, 0, '2026-11-30T09:00:01.000Z', '2026-11-30T09:00:01.000Z');
INSERT INTO workspace_paths (workspace_id, ordinal, path) VALUES ('wsp_main', 0, '/home/dev/demo-service');

INSERT INTO tasks (id, project_id, title, archived_at, revision, created_at, updated_at) VALUES
  ('tsk_flaky', 'prj_demo', 'Fix flaky checkout test', NULL, 0, '2026-11-30T09:01:00.000Z', '2026-11-30T09:01:00.000Z');
INSERT INTO sessions (id, task_id, title, archived_at, revision, created_at, updated_at) VALUES
  ('ses_1', 'tsk_flaky', 'Investigate CI failure', NULL, 0, '2026-11-30T09:01:05.000Z', '2026-11-30T09:01:05.000Z');

INSERT INTO agents (id, task_id, session_id, workspace_id, parent_agent_id, name, state, model, model_reasoning_effort,
                    policy_preset, context_revision, revision, created_at, updated_at) VALUES
  ('agt_main', 'tsk_flaky', 'ses_1', 'wsp_main', NULL, 'main', 'WAITING', 'gpt-5', 'medium', 'ask', 7, 9,
   '2026-11-30T09:01:05.000Z', '2026-11-30T09:04:10.000Z'),
  ('agt_sub', 'tsk_flaky', 'ses_1', 'wsp_main', 'agt_main', 'explorer', 'IDLE', 'gpt-5-mini', 'low', 'read_only', 0, 1,
   '2026-11-30T09:02:00.000Z', '2026-11-30T09:02:30.000Z');

INSERT INTO messages (id, agent_id, source_agent_id, role, content, metadata_json, created_at) VALUES
  ('msg_1', 'agt_main', NULL, 'user', 'The checkout test fails ~1 in 5 runs on CI. Find out why and fix it.', NULL, '2026-11-30T09:01:06.000Z'),
  ('msg_2', 'agt_main', NULL, 'user', 'Also keep the fix minimal, please.', NULL, '2026-11-30T09:04:00.000Z');
INSERT INTO pending_messages (id, agent_id, message_id, source_agent_id, content, ordinal, revision, created_at, updated_at) VALUES
  ('pnd_1', 'agt_main', 'msg_2', NULL, 'Also keep the fix minimal, please.', 0, 0, '2026-11-30T09:04:00.000Z', '2026-11-30T09:04:00.000Z');

INSERT INTO runs (id, agent_id, goal_message_ids_json, initial_step_pending, state, outcome, error_code, revision, created_at, updated_at) VALUES
  ('run_1', 'agt_main', '["msg_1"]', 0, 'WAITING', NULL, NULL, 6, '2026-11-30T09:01:06.000Z', '2026-11-30T09:04:10.000Z');

-- context: group 0 = first turn, group 1 = compaction of part of it, group 2 = current (open) turn
INSERT INTO context_turn_groups (id, agent_id, ordinal, kind, state, revision, created_at, completed_at) VALUES
  ('tg_0', 'agt_main', 0, 'turn',       'COMPLETE', 2, '2026-11-30T09:01:06.000Z', '2026-11-30T09:02:40.000Z'),
  ('tg_1', 'agt_main', 1, 'compaction', 'COMPLETE', 0, '2026-11-30T09:03:00.000Z', '2026-11-30T09:03:05.000Z'),
  ('tg_2', 'agt_main', 2, 'turn',       'OPEN',     0, '2026-11-30T09:03:10.000Z', NULL);

INSERT INTO steps (id, run_id, turn_group_id, ordinal, state, outcome, error_code, created_at, updated_at) VALUES
  ('stp_0', 'run_1', 'tg_0', 0, 'TERMINAL', 'success', NULL, '2026-11-30T09:01:06.000Z', '2026-11-30T09:02:40.000Z'),
  ('stp_1', 'run_1', 'tg_2', 1, 'WAITING',  NULL,      NULL, '2026-11-30T09:03:10.000Z', '2026-11-30T09:04:10.000Z');

INSERT INTO model_attempts (id, agent_id, step_id, kind, sequence, model, state, outcome, profile_id, profile_version, profile_digest,
                            config_digest, context_revision, request_digest, request_json, observation_json, preparation_json,
                            usage_json, error_code, created_at, updated_at) VALUES
  ('att_0', 'agt_main', 'stp_0', 'agent', 0, 'gpt-5', 'TERMINAL', 'success', 'openai-default', 1, 'sha256:aa01',
   'sha256:cf01', 3, 'sha256:rq01', NULL, NULL, '{"tools":["read_file","run_shell"]}',
   '{"input_tokens":5120,"output_tokens":310,"cached_input_tokens":0}', NULL, '2026-11-30T09:01:07.000Z', '2026-11-30T09:01:19.000Z'),
  ('att_c', 'agt_main', NULL, 'compaction', 0, 'gpt-5-mini', 'TERMINAL', 'success', 'openai-default', 1, 'sha256:aa01',
   'sha256:cf02', 5, 'sha256:rq02', NULL, NULL, '{"covered":["ci_1","ci_2"]}',
   '{"input_tokens":14800,"output_tokens":420,"cached_input_tokens":0}', NULL, '2026-11-30T09:03:00.000Z', '2026-11-30T09:03:05.000Z'),
  ('att_1', 'agt_main', 'stp_1', 'agent', 1, 'gpt-5', 'TERMINAL', 'success', 'openai-default', 1, 'sha256:aa01',
   'sha256:cf01', 7, 'sha256:rq03', NULL, NULL, '{"tools":["read_file","run_shell"]}',
   '{"input_tokens":6900,"output_tokens":188,"cached_input_tokens":4096}', NULL, '2026-11-30T09:03:11.000Z', '2026-11-30T09:03:20.000Z');

INSERT INTO attempt_capabilities (attempt_id, ordinal, capability_id, schema_json) VALUES
  ('att_1', 0, 'read_file', '{"type":"object","properties":{"path":{"type":"string"}}}'),
  ('att_1', 1, 'run_shell', '{"type":"object","properties":{"command":{"type":"string"}}}');
INSERT INTO attempt_tool_ordinals (attempt_id, ordinal, provider_tool_id, complete) VALUES
  ('att_0', 0, 'call_A1', 1),
  ('att_1', 0, 'call_B1', 1);

INSERT INTO call_partitions (id, step_id, ordinal, mode, created_at) VALUES
  ('par_0', 'stp_0', 0, 'parallel', '2026-11-30T09:01:19.000Z'),
  ('par_1', 'stp_1', 0, 'serial',   '2026-11-30T09:03:20.000Z');

INSERT INTO capability_assignments (agent_id, capability_id, policy, assigned_at) VALUES
  ('agt_main', 'read_file', 'auto_approve', '2026-11-30T09:01:05.000Z'),
  ('agt_main', 'run_shell', 'ask',          '2026-11-30T09:01:05.000Z');
INSERT INTO capability_loads (agent_id, capability_id, loaded_at) VALUES
  ('agt_main', 'read_file', '2026-11-30T09:01:05.000Z'),
  ('agt_main', 'run_shell', '2026-11-30T09:01:05.000Z');

-- cal_0: finished read; cal_1: held for policy review (= one row in the approval queue)
INSERT INTO calls (id, project_id, workspace_id, agent_id, step_id, attempt_id, partition_id, parent_call_id, source, capability_id,
                   provider_call_id, call_ordinal, input_json, continuation_json, effect, policy, state, wait_reason, outcome,
                   outcome_unknown, auto_review_passed, auto_review_json, revision, created_at, updated_at) VALUES
  ('cal_0', 'prj_demo', 'wsp_main', 'agt_main', 'stp_0', 'att_0', 'par_0', NULL, 'llm', 'read_file',
   'call_A1', 0, '{"path":"tests/checkout.spec.ts"}', NULL, 'read_only', 'auto_approve', 'TERMINAL', NULL, 'success',
   0, NULL, NULL, 3, '2026-11-30T09:01:19.000Z', '2026-11-30T09:01:20.000Z'),
  ('cal_1', 'prj_demo', 'wsp_main', 'agt_main', 'stp_1', 'att_1', 'par_1', NULL, 'llm', 'run_shell',
   'call_B1', 0, '{"command":"npm test -- checkout --runInBand --repeat 20"}', NULL, 'full', 'ask', 'WAITING', 'policy_review', NULL,
   0, 0, '{"approved":false,"risk":"medium","rationale":"shell command needs operator review"}', 1,
   '2026-11-30T09:03:20.000Z', '2026-11-30T09:04:10.000Z');

INSERT INTO results (capture, stored, id, call_id, outcome, content_json, truncated, error_code, error_message, created_at) VALUES
  ('complete', 'full', 'res_0', 'cal_0', 'success', '"import { test } from ''@playwright/test'';\n// ... 212 lines ..."', 0, NULL, NULL,
   '2026-11-30T09:01:20.000Z');

INSERT INTO context_items (id, agent_id, turn_group_id, turn_group_ordinal, kind, source_id, role, content, tool_call_id, tool_name,
                           ordinal, visible, locked, revision, created_at, updated_at) VALUES
  ('ci_0', 'agt_main', 'tg_0', 0, 'message',    'msg_1', 'user',      'The checkout test fails ~1 in 5 runs on CI. Find out why and fix it.', NULL, NULL,
   0, 1, 1, 1, '2026-11-30T09:01:06.000Z', '2026-11-30T09:01:06.000Z'),
  ('ci_1', 'agt_main', 'tg_0', 1, 'tool_calls', 'att_0', 'assistant', '[{"id":"call_A1","name":"read_file","arguments":{"path":"tests/checkout.spec.ts"}}]', 'call_A1', 'read_file',
   1, 0, 0, 1, '2026-11-30T09:01:19.000Z', '2026-11-30T09:03:05.000Z'),
  ('ci_2', 'agt_main', 'tg_0', 2, 'result',     'res_0', 'tool',      'import { test } from ''@playwright/test''; ...', 'call_A1', 'read_file',
   2, 0, 0, 1, '2026-11-30T09:01:20.000Z', '2026-11-30T09:03:05.000Z'),
  ('ci_3', 'agt_main', 'tg_1', 0, 'compaction', 'att_c', 'user',      'Summary: checkout.spec.ts waits on a fixed 500ms timeout before asserting the cart total.', NULL, NULL,
   3, 1, 0, 0, '2026-11-30T09:03:05.000Z', '2026-11-30T09:03:05.000Z'),
  ('ci_4', 'agt_main', 'tg_2', 0, 'tool_calls', 'att_1', 'assistant', '[{"id":"call_B1","name":"run_shell","arguments":{"command":"npm test -- checkout --runInBand --repeat 20"}}]', 'call_B1', 'run_shell',
   4, 1, 0, 0, '2026-11-30T09:03:20.000Z', '2026-11-30T09:03:20.000Z');

INSERT INTO context_compactions (context_item_id, source_revision, covered_item_ids_json, focus) VALUES
  ('ci_3', 5, '["ci_1","ci_2"]', 'keep the failing assertion and timing details');

INSERT INTO context_overrides (id, agent_id, target_kind, target_id, instructions, revision, created_at, updated_at) VALUES
  ('ovr_1', 'agt_main', 'result', 'res_0', 'Only the first 40 lines matter.', 0, '2026-11-30T09:02:00.000Z', '2026-11-30T09:02:00.000Z');

INSERT INTO working_contexts (agent_id, source_revision, revision, digest, prefixes_json, messages_json, request_frame_json, updated_at) VALUES
  ('agt_main', 7, 1, 'sha256:wc07', '[]', NULL, NULL, '2026-11-30T09:03:11.000Z');
INSERT INTO working_context_items (context_item_id, agent_id, source_revision, content, snipped) VALUES
  ('ci_0', 'agt_main', 7, 'The checkout test fails ~1 in 5 runs on CI. Find out why and fix it.', 0);

INSERT INTO projection_decisions (id, agent_id, attempt_id, stage, source_tokens, projected_tokens, details_json, created_at) VALUES
  ('pjd_1', 'agt_main', 'att_1', 'compaction', 14800, 6900, '{"dropped_item_ids":["ci_1","ci_2"]}', '2026-11-30T09:03:11.000Z');

INSERT INTO agent_plans (agent_id, items_json, revision, updated_at) VALUES
  ('agt_main', '[{"text":"Reproduce flake locally","status":"in_progress"},{"text":"Replace fixed timeout with waitFor","status":"pending"}]', 2, '2026-11-30T09:03:10.000Z');
INSERT INTO todo_reminder_state (agent_id, last_context_rowid, pending_tokens) VALUES ('agt_main', 5, 188);

INSERT INTO ingress_requests (client_id, key, operation, request_digest, response_json, created_at) VALUES
  ('gui-7f3c', 'idem-0001', 'create_agent', 'sha256:ing1', '{"id":"agt_main","revision":0}', '2026-11-30T09:01:05.000Z');

INSERT INTO side_effect_ledgers (id, step_id, content, created_at) VALUES
  ('sel_0', 'stp_0', 'read tests/checkout.spec.ts (no side effects)', '2026-11-30T09:02:40.000Z');
"""

ADDED_COLUMNS: dict[str, tuple[str, ...]] = {
    "workspaces": (
        "  executor_ref TEXT,",
        "  executor_id TEXT NOT NULL DEFAULT 'remote' CHECK (executor_id IN ('local', 'remote')),",
    ),
    "model_attempts": ("  request_json TEXT,", "  observation_json TEXT,"),
    "calls": ("  continuation_json TEXT,", "  auto_review_json TEXT,"),
    "results": (
        "  capture TEXT NOT NULL DEFAULT 'unknown' CHECK (capture IN ('complete', 'partial', 'unknown')),",
        "  stored TEXT NOT NULL DEFAULT 'unknown' CHECK (stored IN ('full', 'unknown')),",
    ),
}
"""The 0.1.2 column lines, verbatim, per table (all four tables gained two)."""

NEW_TABLES = ("todo_reminder_state", "working_context_items", "working_contexts", "context_compactions",
              "purge_cleanups")
NEW_INDEXES = ("working_context_agent",)
COMMENT_0_1_2 = "-- No table for edit_file/patch_file file history"
COMMENT_0_1_0 = "-- No table for write_file/edit_file file history"


def ddl_0_1_0() -> str:
    """The 0.1.2 text less every 0.1.2 addition; each removal must match exactly once."""
    text = DDL_0_1_2
    for lines in ADDED_COLUMNS.values():
        for line in lines:
            text = _remove_once(text, line + "\n")
    for index in NEW_INDEXES:
        text, count = re.subn(rf"CREATE INDEX IF NOT EXISTS {index} ON [^\n]*\n", "", text)
        assert count == 1, index
    for table in NEW_TABLES:
        block = re.compile(rf"CREATE TABLE IF NOT EXISTS {table} \(\n.*?\n\) STRICT;\n\n?", re.S)
        text, count = block.subn("", text)
        assert count == 1, table
    return _remove_once(text, COMMENT_0_1_2, COMMENT_0_1_0)


def upgrade_statements() -> list[str]:
    """What an in-place 0.1.0 → 0.1.2 upgrade must have run [inferred]: ADD COLUMN appends at the end."""
    statements = []
    for table, lines in ADDED_COLUMNS.items():
        for line in lines:
            statements.append(f"ALTER TABLE {table} ADD COLUMN {line.strip().rstrip(',')};")
    return statements


def _remove_once(text: str, old: str, new: str = "") -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)
