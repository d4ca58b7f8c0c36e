-- What the engine records as a request runs: the state it has brought the service to, its steps,
-- what it deploys (the service's configuration when it was asked for), and the worker's lease.
-- batch_id groups the requests of one environment-level action (a request alone is its own batch).
ALTER TABLE deployment_requests ADD COLUMN state TEXT NOT NULL DEFAULT 'QUEUED';
ALTER TABLE deployment_requests ADD COLUMN batch_id TEXT NOT NULL DEFAULT '';
ALTER TABLE deployment_requests ADD COLUMN snapshot TEXT NOT NULL DEFAULT '{}';
ALTER TABLE deployment_requests ADD COLUMN steps TEXT NOT NULL DEFAULT '[]';
ALTER TABLE deployment_requests ADD COLUMN lease_until TIMESTAMP;
ALTER TABLE deployment_requests ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX deployment_requests_environment ON deployment_requests(environment_id, created_at);
