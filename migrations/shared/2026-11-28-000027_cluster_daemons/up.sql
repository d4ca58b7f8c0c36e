-- The Docker daemon each cluster naming an endpoint was deployed on, by the daemon's own ID:
-- a daemon one organization's clusters run on cannot become another's. The claim goes with
-- its cluster.
CREATE TABLE cluster_daemons (
    cluster_id TEXT PRIMARY KEY REFERENCES clusters(id) ON DELETE CASCADE,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    daemon_id TEXT NOT NULL
);
CREATE INDEX cluster_daemons_daemon ON cluster_daemons(daemon_id);
