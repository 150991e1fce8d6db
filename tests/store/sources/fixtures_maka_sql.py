"""The maka `runtime.sqlite` schema (runtime schema v11) used by the maka fixture.

The reference (§5.4) leaves the maka DDL to the implementer: it is written here from the
table and column facts of reference §1.4 and checked column by column, key by key and
CHECK by CHECK against the public `apache/maka` migrations at a commit whose
`SQLITE_RUNTIME_SCHEMA_VERSION` is 11 (runtime migrations 1-11, session-metadata v21,
core-execution, usage). Names, types, keys, constraints and physical column order match
(e.g. `tool_operations.dispatch_event_id` is last because migration 4 added it); the
formatting is ours. Only the tables agentdesk reads, plus the few that make the file
look like a real operational store, are created; `PRAGMA user_version = 11` is what the
runtime's read-only open checks.
"""

USER_VERSION = 11

DDL = r"""
-- ===== runtime store (SqliteRuntimeStore migrations 1..11) =====
CREATE TABLE runtime_events (
  event_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  invocation_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  turn_id TEXT NOT NULL,
  event_seq INTEGER NOT NULL CHECK (event_seq > 0),
  event_kind TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  committed_at INTEGER NOT NULL,
  UNIQUE (invocation_id, event_seq)
);
CREATE INDEX runtime_events_by_run ON runtime_events(session_id, run_id, event_seq);
CREATE INDEX runtime_events_by_session ON runtime_events(session_id, committed_at, event_id);
CREATE TABLE tool_journal_events (
  journal_seq INTEGER PRIMARY KEY AUTOINCREMENT,
  journal_event_id TEXT NOT NULL UNIQUE,
  operation_id TEXT NOT NULL,
  invocation_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  turn_id TEXT NOT NULL,
  state TEXT NOT NULL,
  runtime_event_id TEXT,
  canonical_args_hash TEXT,
  recovery_mode TEXT,
  external_handle TEXT,
  metadata_json TEXT,
  committed_at INTEGER NOT NULL,
  FOREIGN KEY (runtime_event_id) REFERENCES runtime_events(event_id)
);
CREATE INDEX tool_journal_events_by_operation ON tool_journal_events(operation_id, journal_seq);
CREATE TABLE tool_operations (
  operation_id TEXT PRIMARY KEY,
  invocation_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  turn_id TEXT NOT NULL,
  provider_tool_call_id TEXT NOT NULL,
  tool_name TEXT NOT NULL,
  canonical_args_hash TEXT NOT NULL,
  recovery_mode TEXT NOT NULL,
  current_state TEXT NOT NULL,
  call_event_id TEXT NOT NULL,
  result_event_id TEXT,
  version INTEGER NOT NULL CHECK (version > 0),
  dispatch_event_id TEXT REFERENCES runtime_events(event_id),
  FOREIGN KEY (call_event_id) REFERENCES runtime_events(event_id),
  FOREIGN KEY (result_event_id) REFERENCES runtime_events(event_id),
  UNIQUE (invocation_id, provider_tool_call_id)
);
CREATE TABLE runtime_partial_snapshots (
  stream_key TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  invocation_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  turn_id TEXT NOT NULL,
  after_event_id TEXT,
  payload_json TEXT NOT NULL,
  text_content TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX runtime_partial_snapshots_by_run
  ON runtime_partial_snapshots(session_id, run_id, updated_at, stream_key);
CREATE TABLE runtime_capabilities (
  capability TEXT PRIMARY KEY,
  version INTEGER NOT NULL CHECK (version > 0)
);
INSERT INTO runtime_capabilities(capability, version) VALUES
  ('runtime_recovery_authority', 1), ('runtime_continuation_authority', 1),
  ('runtime_workspace_version_authority', 1);
CREATE TABLE runtime_partial_segments (
  stream_key TEXT NOT NULL,
  segment_seq INTEGER NOT NULL CHECK (segment_seq > 0),
  text_content TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (stream_key, segment_seq),
  FOREIGN KEY (stream_key) REFERENCES runtime_partial_snapshots(stream_key) ON DELETE CASCADE
);
CREATE TABLE runtime_session_event_ordinals (
  session_id TEXT NOT NULL,
  ordinal INTEGER NOT NULL CHECK (ordinal > 0),
  event_id TEXT NOT NULL UNIQUE,
  PRIMARY KEY (session_id, ordinal),
  FOREIGN KEY (event_id) REFERENCES runtime_events(event_id) ON DELETE CASCADE
) WITHOUT ROWID;

-- ===== session metadata (v21) =====
CREATE TABLE projects (
  project_id TEXT PRIMARY KEY,
  identity TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  last_used_at INTEGER NOT NULL,
  archived_at INTEGER
);
CREATE TABLE project_locations (
  project_id TEXT NOT NULL,
  path TEXT NOT NULL,
  is_worktree INTEGER NOT NULL CHECK (is_worktree IN (0, 1)),
  last_used_at INTEGER NOT NULL,
  PRIMARY KEY (project_id, path),
  FOREIGN KEY (project_id) REFERENCES projects(project_id) ON DELETE CASCADE
);
CREATE TABLE session_metadata (
  session_id TEXT PRIMARY KEY,
  payload_json TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  last_used_at INTEGER NOT NULL,
  last_message_at INTEGER,
  name TEXT NOT NULL,
  is_flagged INTEGER NOT NULL CHECK (is_flagged IN (0, 1)),
  is_archived INTEGER NOT NULL CHECK (is_archived IN (0, 1)),
  status TEXT NOT NULL,
  status_updated_at INTEGER,
  parent_session_id TEXT,
  revision_root_session_id TEXT,
  revision_index INTEGER,
  has_unread INTEGER NOT NULL CHECK (has_unread IN (0, 1)),
  backend TEXT NOT NULL,
  llm_connection_slug TEXT NOT NULL,
  model TEXT NOT NULL,
  metadata_version INTEGER NOT NULL CHECK (metadata_version > 0),
  committed_at INTEGER NOT NULL,
  subagent_parent_session_id TEXT,
  subagent_parent_run_id TEXT,
  subagent_tool_call_id TEXT,
  subagent_swarm_id TEXT,
  subagent_item_id TEXT,
  subagent_request_fingerprint TEXT,
  subagent_initial_turn_id TEXT,
  subagent_initial_run_id TEXT
);
CREATE INDEX session_metadata_by_parent ON session_metadata(parent_session_id, session_id);
CREATE INDEX session_metadata_by_subagent_parent
  ON session_metadata(subagent_parent_session_id, session_id);
CREATE TABLE sandbox_boundary_log (
  session_id TEXT NOT NULL,
  entry_id TEXT NOT NULL,
  entry_kind TEXT NOT NULL CHECK (entry_kind IN ('genesis', 'expansion_request', 'user_change')),
  request_id TEXT,
  status TEXT NOT NULL CHECK (status IN ('applied', 'pending', 'approved', 'denied', 'conflict')),
  base_revision INTEGER CHECK (base_revision >= 0),
  applied_revision INTEGER CHECK (applied_revision >= 0),
  boundary_json TEXT,
  expansion_json TEXT,
  justification TEXT,
  outcome_reason TEXT,
  created_at INTEGER NOT NULL CHECK (created_at >= 0),
  settled_at INTEGER CHECK (settled_at >= 0),
  turn_id TEXT,
  run_id TEXT,
  PRIMARY KEY (session_id, entry_id),
  UNIQUE (session_id, request_id),
  FOREIGN KEY (session_id) REFERENCES session_metadata(session_id) ON DELETE CASCADE
);

-- ===== core execution =====
CREATE TABLE core_agent_runs (
  session_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  record_json TEXT NOT NULL,
  PRIMARY KEY (session_id, run_id)
);
CREATE TABLE core_agent_run_events (
  session_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  sequence INTEGER NOT NULL CHECK (sequence >= 0),
  event_id TEXT NOT NULL,
  event_type TEXT NOT NULL,
  event_ts INTEGER NOT NULL,
  record_json TEXT NOT NULL,
  PRIMARY KEY (session_id, run_id, sequence),
  FOREIGN KEY (session_id, run_id) REFERENCES core_agent_runs(session_id, run_id) ON DELETE CASCADE
);
CREATE TABLE core_interaction_requests (
  request_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  turn_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  request_kind TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  record_json TEXT NOT NULL
);
CREATE TABLE core_interaction_outcomes (
  request_id TEXT PRIMARY KEY,
  record_json TEXT NOT NULL,
  FOREIGN KEY (request_id) REFERENCES core_interaction_requests(request_id) ON DELETE CASCADE
);

-- ===== usage =====
CREATE TABLE usage_model_call_attempts (
  attempt_id TEXT PRIMARY KEY,
  completed_at INTEGER NOT NULL CHECK (completed_at >= 0),
  record_json TEXT NOT NULL
);

-- ===== operational bookkeeping =====
CREATE TABLE operational_schema_migrations (
  scope TEXT PRIMARY KEY,
  version INTEGER NOT NULL CHECK (version >= 0),
  applied_at INTEGER NOT NULL CHECK (applied_at >= 0)
);
"""
