-- Back to requests that go with their service: those of deleted services go now, and the table
-- is rebuilt with its foreign key.
DELETE FROM deployment_requests WHERE service_id NOT IN (SELECT id FROM services);
CREATE TABLE deployment_requests_kept (
    id TEXT PRIMARY KEY NOT NULL,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    environment_id TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
    service_id TEXT NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    action TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    git_commit_id TEXT,
    image_tag TEXT,
    chart_version TEXT,
    status TEXT NOT NULL,
    reason TEXT,
    claimed_by TEXT,
    created_at TIMESTAMP NOT NULL,
    started_at TIMESTAMP,
    finished_at TIMESTAMP,
    state TEXT NOT NULL DEFAULT 'QUEUED',
    batch_id TEXT NOT NULL DEFAULT '',
    snapshot TEXT NOT NULL DEFAULT '{}',
    steps TEXT NOT NULL DEFAULT '[]',
    lease_until TIMESTAMP,
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    position INTEGER NOT NULL DEFAULT 0,
    origin TEXT NOT NULL DEFAULT 'API'
);
INSERT INTO deployment_requests_kept SELECT
    id, organization_id, environment_id, service_id, action, requested_by, git_commit_id,
    image_tag, chart_version, status, reason, claimed_by, created_at, started_at, finished_at,
    state, batch_id, snapshot, steps, lease_until, cancel_requested, position, origin
FROM deployment_requests;
DROP TABLE deployment_requests;
ALTER TABLE deployment_requests_kept RENAME TO deployment_requests;
CREATE INDEX deployment_requests_queue ON deployment_requests(status, created_at, id);
CREATE INDEX deployment_requests_service ON deployment_requests(service_id, created_at);
CREATE UNIQUE INDEX deployment_requests_one_running ON deployment_requests(environment_id) WHERE status = 'RUNNING';
CREATE INDEX deployment_requests_environment ON deployment_requests(environment_id, created_at);
