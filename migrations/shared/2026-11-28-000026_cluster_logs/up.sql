-- What Capstan did on each cluster (deploying it, stopping it, reaching its host), line by line:
-- the cluster's log, read newest first. The lines go with their cluster.
CREATE TABLE cluster_logs (
    cluster_id TEXT NOT NULL REFERENCES clusters(id) ON DELETE CASCADE,
    position BIGINT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    step TEXT NOT NULL,
    level TEXT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (cluster_id, position)
);
