-- The durable queue of deployment requests. The partial unique index is what keeps one request
-- RUNNING per environment across every server process: a second claim fails on it.
CREATE TABLE deployment_requests (
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
    finished_at TIMESTAMP
);
CREATE INDEX deployment_requests_queue ON deployment_requests(status, created_at, id);
CREATE INDEX deployment_requests_service ON deployment_requests(service_id, created_at);
CREATE UNIQUE INDEX deployment_requests_one_running ON deployment_requests(environment_id) WHERE status = 'RUNNING';
