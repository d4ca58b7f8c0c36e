-- A cluster's nodes and machines as sent, its advanced settings set (JSON), and the engine's
-- work on it: its state, whether it runs its configuration, the worker running an action.
ALTER TABLE clusters ADD COLUMN spec TEXT NOT NULL DEFAULT '{}';
ALTER TABLE clusters ADD COLUMN advanced_settings TEXT NOT NULL DEFAULT '{}';
ALTER TABLE clusters ADD COLUMN state TEXT NOT NULL DEFAULT 'READY';
ALTER TABLE clusters ADD COLUMN deployment_status TEXT NOT NULL DEFAULT 'NEVER_DEPLOYED';
ALTER TABLE clusters ADD COLUMN state_reason TEXT;
ALTER TABLE clusters ADD COLUMN queued_at TIMESTAMP;
ALTER TABLE clusters ADD COLUMN last_deployment_date TIMESTAMP;
ALTER TABLE clusters ADD COLUMN last_execution_id TEXT;
ALTER TABLE clusters ADD COLUMN claimed_by TEXT;
ALTER TABLE clusters ADD COLUMN lease_until TIMESTAMP;
CREATE INDEX clusters_state ON clusters(state, queued_at);
