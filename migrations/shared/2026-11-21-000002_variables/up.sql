-- Whether each service runs its current configuration (NEVER_DEPLOYED, UP_TO_DATE, OUT_OF_DATE).
ALTER TABLE services ADD COLUMN deployment_status TEXT NOT NULL DEFAULT 'NEVER_DEPLOYED';

-- Variables and secrets. parent_id is the project, environment or service they are attached to;
-- keys are unique (case-sensitively) per parent. A secret's value is encrypted by the application.
-- Aliases and overrides go with the variable they point at.
CREATE TABLE variables (
    id TEXT PRIMARY KEY NOT NULL,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    environment_id TEXT REFERENCES environments(id) ON DELETE CASCADE,
    service_id TEXT REFERENCES services(id) ON DELETE CASCADE,
    parent_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT,
    is_secret BOOLEAN NOT NULL,
    variable_type TEXT NOT NULL,
    mount_path TEXT,
    description TEXT,
    enable_interpolation_in_file BOOLEAN,
    aliased_variable_id TEXT REFERENCES variables(id) ON DELETE CASCADE,
    overridden_variable_id TEXT REFERENCES variables(id) ON DELETE CASCADE,
    secret_manager_access_id TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX variables_key ON variables(parent_id, key);
CREATE INDEX variables_parent ON variables(parent_id, is_secret, created_at, id);
CREATE INDEX variables_aliased ON variables(aliased_variable_id);
CREATE INDEX variables_overridden ON variables(overridden_variable_id);
