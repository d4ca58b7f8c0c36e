-- Ids are UUID text and timestamps are UTC, so one diesel schema serves SQLite and PostgreSQL.
-- name_key is the lower-cased name: names are unique case-insensitively under their parent.
-- Deleting an organization, project or environment removes what is inside it (CASCADE);
-- a cluster, registry or git token still referenced cannot be deleted (NO ACTION -> 409).

CREATE TABLE organizations (
    id TEXT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    description TEXT,
    plan TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY NOT NULL,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    description TEXT,
    role TEXT NOT NULL,
    token_hash TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    last_used_at TIMESTAMP
);
CREATE UNIQUE INDEX api_tokens_hash ON api_tokens(token_hash);
CREATE INDEX api_tokens_org ON api_tokens(organization_id, created_at, id);

CREATE TABLE cloud_credentials (
    id TEXT PRIMARY KEY NOT NULL,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    access_key_id TEXT NOT NULL,
    secret_access_key TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX cloud_credentials_name ON cloud_credentials(organization_id, name_key);

CREATE TABLE clusters (
    id TEXT PRIMARY KEY NOT NULL,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    description TEXT,
    region TEXT NOT NULL,
    cloud_provider TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX clusters_name ON clusters(organization_id, name_key);

CREATE TABLE projects (
    id TEXT PRIMARY KEY NOT NULL,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    description TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX projects_name ON projects(organization_id, name_key);

CREATE TABLE environments (
    id TEXT PRIMARY KEY NOT NULL,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    cluster_id TEXT NOT NULL REFERENCES clusters(id),
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    mode TEXT NOT NULL,
    last_updated_by TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX environments_name ON environments(project_id, name_key);
CREATE INDEX environments_cluster ON environments(cluster_id);

CREATE TABLE container_registries (
    id TEXT PRIMARY KEY NOT NULL,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    url TEXT NOT NULL,
    description TEXT,
    cluster_id TEXT REFERENCES clusters(id) ON DELETE SET NULL,
    config TEXT NOT NULL,
    secret_config TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX container_registries_name ON container_registries(organization_id, name_key);

CREATE TABLE git_tokens (
    id TEXT PRIMARY KEY NOT NULL,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    provider TEXT NOT NULL,
    token TEXT NOT NULL,
    description TEXT,
    workspace TEXT,
    git_api_url TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX git_tokens_name ON git_tokens(organization_id, name_key);

CREATE TABLE services (
    id TEXT PRIMARY KEY NOT NULL,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    environment_id TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    description TEXT,
    spec TEXT NOT NULL,
    registry_id TEXT REFERENCES container_registries(id),
    git_token_id TEXT REFERENCES git_tokens(id),
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX services_name ON services(environment_id, name_key);
CREATE INDEX services_kind ON services(environment_id, kind, created_at, id);
CREATE INDEX services_registry ON services(registry_id);
CREATE INDEX services_git_token ON services(git_token_id);
