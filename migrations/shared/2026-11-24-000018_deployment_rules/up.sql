-- Project deployment rules: what a new environment whose name matches `wildcard` takes (mode,
-- cluster, hours), the first by priority_index. Names unique per project, case aside.
CREATE TABLE project_deployment_rules (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    description TEXT,
    mode TEXT NOT NULL,
    cluster_id TEXT NOT NULL REFERENCES clusters(id),
    wildcard TEXT NOT NULL,
    priority_index INTEGER NOT NULL,
    auto_stop BOOLEAN NOT NULL,
    timezone TEXT NOT NULL,
    start_time TEXT NOT NULL,
    stop_time TEXT NOT NULL,
    weekdays TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    UNIQUE (project_id, name_key)
);
CREATE INDEX project_deployment_rules_cluster ON project_deployment_rules(cluster_id);
-- The rule an environment runs by (its id is the environment's); next_turn_at is when the
-- scheduler next starts or stops it.
CREATE TABLE environment_deployment_rules (
    id TEXT PRIMARY KEY REFERENCES environments(id) ON DELETE CASCADE,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    on_demand_preview BOOLEAN NOT NULL,
    auto_preview BOOLEAN NOT NULL,
    auto_stop BOOLEAN NOT NULL,
    timezone TEXT NOT NULL,
    start_time TEXT NOT NULL,
    stop_time TEXT NOT NULL,
    weekdays TEXT NOT NULL,
    next_turn_at TIMESTAMP,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX environment_deployment_rules_due ON environment_deployment_rules(next_turn_at);
