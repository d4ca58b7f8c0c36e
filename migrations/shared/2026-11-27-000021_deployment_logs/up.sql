-- What each step of a deployment request did, line by line, masked before it is written. The
-- lines go with their request (and so with its environment). environment_id is kept on every
-- line: an environment's log is read by it, newest first.
CREATE TABLE deployment_logs (
    request_id TEXT NOT NULL REFERENCES deployment_requests(id) ON DELETE CASCADE,
    position BIGINT NOT NULL,
    environment_id TEXT NOT NULL,
    service_id TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    step TEXT NOT NULL,
    level TEXT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (request_id, position)
);
CREATE INDEX deployment_logs_environment ON deployment_logs(environment_id, created_at);
