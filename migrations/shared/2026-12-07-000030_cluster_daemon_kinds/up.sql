-- Whether the daemon a cluster was deployed on is one Docker host or a manager of a Swarm,
-- for the cluster's record to say. Claims made before this column read as hosts until their
-- cluster is deployed again.
ALTER TABLE cluster_daemons ADD COLUMN kind TEXT NOT NULL DEFAULT 'DOCKER_HOST';
