# ruff: noqa: E501  (the schema and rows are verbatim text; their lines stay as published)
"""The stageflow fixture SQL of the developer reference (§5.2), kept apart from the builder.

stageflow publishes no DDL: the schema below is the reference's reconstruction from the
DML in `dist/agents/store.js` 0.40.0 (column names exact, types and keys inferred). The
rows are the reference's story, verbatim; `fixtures_stageflow` adds generated volume.
"""

DDL = r"""-- ===== DDL [inferred from dist/agents/store.js 0.40.0 SQL; column names exact, types/keys inferred] =====
CREATE TABLE agent_definitions (
  project_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  current_revision INTEGER NOT NULL,          -- 0 = file never parsed
  archived INTEGER NOT NULL DEFAULT 0,        -- 0/1
  file_hash TEXT,
  issues_json TEXT NOT NULL DEFAULT '[]',
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (project_key, agent_id)
);
CREATE TABLE agent_revisions (
  project_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  revision INTEGER NOT NULL,
  definition_json TEXT NOT NULL,
  yaml_text TEXT NOT NULL,
  source TEXT NOT NULL,
  author TEXT,
  summary TEXT,
  restored_from INTEGER,
  created_at TEXT NOT NULL,
  PRIMARY KEY (project_key, agent_id, revision)
);
CREATE TABLE agent_sessions (
  session_id TEXT PRIMARY KEY,
  project_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,                     -- logical FK agent_definitions(project_key, agent_id)
  revision INTEGER NOT NULL,                  -- agent definition revision the session runs
  backend TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('open', 'running', 'waiting', 'held', 'closed')),  -- "migration 013" CHECK (seed comment)
  source TEXT NOT NULL,
  source_ref TEXT,
  thread_key TEXT,
  title TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX agent_sessions_by_project ON agent_sessions (project_key, agent_id, updated_at DESC, session_id DESC);
CREATE INDEX agent_sessions_by_thread ON agent_sessions (project_key, agent_id, thread_key);
CREATE TABLE agent_messages (
  message_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,                   -- logical FK agent_sessions
  seq INTEGER NOT NULL,
  turn_id TEXT,                               -- logical FK agent_turns (nullable)
  role TEXT NOT NULL,
  author TEXT,
  text TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (session_id, seq)
);
CREATE TABLE agent_turns (
  turn_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,                   -- logical FK agent_sessions
  seq INTEGER NOT NULL,
  revision INTEGER NOT NULL,
  trace_id TEXT NOT NULL,
  status TEXT NOT NULL,                       -- running | waiting | succeeded | failed | cancelled
  error_code TEXT,
  input_tokens INTEGER,
  output_tokens INTEGER,
  cost_usd REAL,
  started_at TEXT NOT NULL,
  ended_at TEXT,
  UNIQUE (session_id, seq)
);
CREATE TABLE agent_spans (
  span_id TEXT PRIMARY KEY,
  turn_id TEXT NOT NULL,                      -- logical FK agent_turns
  parent_span_id TEXT,                        -- logical FK agent_spans
  name TEXT NOT NULL,
  kind TEXT NOT NULL,                         -- agent | model | tool | sub_agent | guardrail | gate | internal
  status TEXT NOT NULL,                       -- ok | error | cancelled
  started_at TEXT NOT NULL,
  ended_at TEXT,
  duration_ms INTEGER,
  input_tokens INTEGER,
  output_tokens INTEGER,
  attributes_json TEXT NOT NULL DEFAULT '{}',
  input_text TEXT,
  output_text TEXT
);
CREATE INDEX agent_spans_by_turn ON agent_spans (turn_id, started_at, span_id);
CREATE TABLE agent_eval_scores (
  turn_id TEXT NOT NULL,
  metric TEXT NOT NULL,
  score REAL NOT NULL,
  recorded_at TEXT NOT NULL,
  PRIMARY KEY (turn_id, metric)
);
CREATE TABLE agent_deliveries (
  turn_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  connection_id TEXT NOT NULL,
  provider TEXT NOT NULL,
  reply_to TEXT NOT NULL,
  text TEXT NOT NULL,
  state TEXT NOT NULL,                        -- (pending?) | sending | (sent?) | failed | unknown
  attempts INTEGER NOT NULL DEFAULT 0,
  error_code TEXT,
  error_message TEXT,
  retryable INTEGER NOT NULL DEFAULT 0,
  next_attempt_at TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE TABLE agent_approvals (
  approval_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  turn_id TEXT,
  tool TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  payload_hash TEXT NOT NULL,
  status TEXT NOT NULL,                       -- pending | approved | denied | expired   (approved/denied spelling inferred)
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  decided_at TEXT,
  actor_json TEXT
);
CREATE INDEX agent_approvals_by_session ON agent_approvals (session_id, status, created_at);
CREATE INDEX agent_approvals_pending_expiry ON agent_approvals (status, expires_at);
CREATE TABLE agent_executed_payloads (
  session_id TEXT NOT NULL,
  payload_hash TEXT NOT NULL,
  executed_at TEXT NOT NULL,
  PRIMARY KEY (session_id, payload_hash)
);
CREATE TABLE agent_inbound_events (
  project_key TEXT NOT NULL,
  dedupe_key TEXT NOT NULL,
  received_at TEXT NOT NULL,
  PRIMARY KEY (project_key, dedupe_key)
);
CREATE TABLE agent_outbound_sends (
  session_id TEXT NOT NULL,
  operation_key TEXT NOT NULL,
  state TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (session_id, operation_key)
);
CREATE TABLE agent_schedules (
  project_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  next_run_at TEXT NOT NULL,
  PRIMARY KEY (project_key, agent_id)
);

"""

REFERENCE_ROWS = r"""INSERT INTO agent_definitions (project_key, agent_id, current_revision, archived, file_hash, issues_json, created_at, updated_at) VALUES
  ('3f2a9c1d0b7e4a66', 'support-bot', 2, 0, 'sha256:9d1e', '[]', '2026-11-28T10:00:00.000Z', '2026-11-29T16:20:00.000Z');
INSERT INTO agent_revisions (project_key, agent_id, revision, definition_json, yaml_text, source, author, summary, restored_from, created_at) VALUES
  ('3f2a9c1d0b7e4a66', 'support-bot', 1, '{"id":"support-bot","model":"claude-sonnet","tools":["lookup_order"]}',
   'id: support-bot\nmodel: claude-sonnet\ntools: [lookup_order]\n', 'file', 'ada', 'initial', NULL, '2026-11-28T10:00:00.000Z'),
  ('3f2a9c1d0b7e4a66', 'support-bot', 2, '{"id":"support-bot","model":"claude-sonnet","tools":["lookup_order","refund_order"],"approvals":{"refund_order":"always"}}',
   'id: support-bot\nmodel: claude-sonnet\ntools: [lookup_order, refund_order]\napprovals: {refund_order: always}\n', 'file', 'ada', 'add refunds behind approval', NULL, '2026-11-29T16:20:00.000Z');
INSERT INTO agent_schedules (project_key, agent_id, next_run_at) VALUES ('3f2a9c1d0b7e4a66', 'support-bot', '2026-12-01T08:00:00.000Z');

INSERT INTO agent_sessions (session_id, project_key, agent_id, revision, backend, status, source, source_ref, thread_key, title, created_at, updated_at) VALUES
  ('ses_a', '3f2a9c1d0b7e4a66', 'support-bot', 2, 'anthropic', 'waiting', 'slack', 'U024BE7LH', 'C0123:1732950000.001', 'Refund for order 8812', '2026-11-30T09:00:00.000Z', '2026-11-30T09:06:02.000Z'),
  ('ses_b', '3f2a9c1d0b7e4a66', 'support-bot', 1, 'anthropic', 'closed',  'web',   'visitor-77', NULL, 'Where is my parcel?', '2026-11-29T12:00:00.000Z', '2026-11-29T12:03:00.000Z');

INSERT INTO agent_turns (turn_id, session_id, seq, revision, trace_id, status, error_code, input_tokens, output_tokens, cost_usd, started_at, ended_at) VALUES
  ('trn_b1', 'ses_b', 1, 1, 'trc_b1', 'succeeded', NULL, 2100, 160, 0.0087, '2026-11-29T12:00:00.000Z', '2026-11-29T12:00:06.500Z'),
  ('trn_a1', 'ses_a', 1, 2, 'trc_a1', 'succeeded', NULL, 3400, 210, 0.0134, '2026-11-30T09:00:00.000Z', '2026-11-30T09:01:30.000Z'),
  ('trn_a2', 'ses_a', 2, 2, 'trc_a2', 'waiting',   NULL, NULL, NULL, NULL,   '2026-11-30T09:06:00.000Z', NULL);

INSERT INTO agent_messages (message_id, session_id, seq, turn_id, role, author, text, created_at) VALUES
  ('m_b1', 'ses_b', 1, 'trn_b1', 'user',      'visitor-77',  'Where is my parcel?', '2026-11-29T12:00:00.000Z'),
  ('m_b2', 'ses_b', 2, 'trn_b1', 'assistant', 'support-bot', 'It left the depot this morning.', '2026-11-29T12:00:06.500Z'),
  ('m_a1', 'ses_a', 1, 'trn_a1', 'user',      'U024BE7LH',   'Order 8812 arrived broken, please refund.', '2026-11-30T09:00:00.000Z'),
  ('m_a2', 'ses_a', 2, 'trn_a1', 'assistant', 'support-bot', 'Refund of 19.90 EUR issued for order 8812.', '2026-11-30T09:01:30.000Z'),
  ('m_a3', 'ses_a', 3, 'trn_a2', 'user',      'U024BE7LH',   'Also refund order 8813 please.', '2026-11-30T09:06:00.000Z');

INSERT INTO agent_spans (span_id, turn_id, parent_span_id, name, kind, status, started_at, ended_at, duration_ms, input_tokens, output_tokens, attributes_json, input_text, output_text) VALUES
  ('sp_a1_root', 'trn_a1', NULL,         'support-bot',   'agent', 'ok', '2026-11-30T09:00:00.000Z', '2026-11-30T09:01:30.000Z', 90000, 3400, 210, '{"revision":2}', NULL, NULL),
  ('sp_a1_m1',   'trn_a1', 'sp_a1_root', 'claude-sonnet', 'model', 'ok', '2026-11-30T09:00:00.100Z', '2026-11-30T09:00:02.300Z', 2200, 1500, 60, '{"provider":"anthropic"}', NULL, NULL),
  ('sp_a1_t1',   'trn_a1', 'sp_a1_root', 'lookup_order',  'tool',  'ok', '2026-11-30T09:00:02.400Z', '2026-11-30T09:00:02.900Z', 500, NULL, NULL, '{}', '{"order":"8812"}', '{"status":"delivered","amount":19.9}'),
  ('sp_a1_g1',   'trn_a1', 'sp_a1_root', 'refund_order approval', 'gate', 'ok', '2026-11-30T09:00:03.000Z', '2026-11-30T09:01:25.000Z', 82000, NULL, NULL, '{"approval_id":"apr_1"}', NULL, NULL),
  ('sp_a1_t2',   'trn_a1', 'sp_a1_root', 'refund_order',  'tool',  'ok', '2026-11-30T09:01:25.100Z', '2026-11-30T09:01:26.000Z', 900, NULL, NULL, '{}', '{"order":"8812","amount":19.9}', '{"refund_id":"rf_551"}'),
  ('sp_a1_m2',   'trn_a1', 'sp_a1_root', 'claude-sonnet', 'model', 'ok', '2026-11-30T09:01:26.100Z', '2026-11-30T09:01:29.900Z', 3800, 1900, 150, '{"provider":"anthropic"}', NULL, NULL),
  ('sp_b1_root', 'trn_b1', NULL,         'support-bot',   'agent', 'ok', '2026-11-29T12:00:00.000Z', '2026-11-29T12:00:06.500Z', 6500, 2100, 160, '{"revision":1}', NULL, NULL);

INSERT INTO agent_eval_scores (turn_id, metric, score, recorded_at) VALUES
  ('trn_a1', 'helpfulness', 0.92, '2026-11-30T09:02:00.000Z'),
  ('trn_b1', 'helpfulness', 0.80, '2026-11-29T12:05:00.000Z');

INSERT INTO agent_approvals (approval_id, session_id, turn_id, tool, payload_json, payload_hash, status, created_at, expires_at, decided_at, actor_json) VALUES
  ('apr_0', 'ses_b', 'trn_b1', 'refund_order', '{"order":"7001","amount":5.0}', 'a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90', 'expired',
   '2026-11-29T12:00:03.000Z', '2026-11-29T12:15:03.000Z', '2026-11-29T12:15:03.000Z', NULL),
  ('apr_1', 'ses_a', 'trn_a1', 'refund_order', '{"order":"8812","amount":19.9}', '5e0f2d7c8b9a1c3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f80912', 'approved',
   '2026-11-30T09:00:03.000Z', '2026-11-30T09:15:03.000Z', '2026-11-30T09:01:25.000Z', '{"kind":"user","id":"U0OPS1","name":"Grace"}'),
  ('apr_2', 'ses_a', 'trn_a2', 'refund_order', '{"order":"8813","amount":42.5}', '0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d', 'pending',
   '2026-11-30T09:06:02.000Z', '2026-11-30T09:21:02.000Z', NULL, NULL);
INSERT INTO agent_executed_payloads (session_id, payload_hash, executed_at) VALUES
  ('ses_a', '5e0f2d7c8b9a1c3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f80912', '2026-11-30T09:01:26.000Z');

INSERT INTO agent_deliveries (turn_id, session_id, connection_id, provider, reply_to, text, state, attempts, error_code, error_message, retryable, next_attempt_at, created_at, updated_at) VALUES
  ('trn_a1', 'ses_a', 'conn_slack_main', 'slack', 'C0123:1732950000.001', 'Refund of 19.90 EUR issued for order 8812.', 'sent', 1, NULL, NULL, 0, NULL, '2026-11-30T09:01:30.000Z', '2026-11-30T09:01:31.000Z');
INSERT INTO agent_inbound_events (project_key, dedupe_key, received_at) VALUES
  ('3f2a9c1d0b7e4a66', 'slack:Ev0PV52K21', '2026-11-30T09:00:00.000Z');
INSERT INTO agent_outbound_sends (session_id, operation_key, state, updated_at) VALUES
  ('ses_a', 'reply:trn_a1', 'sent', '2026-11-30T09:01:31.000Z');
"""
