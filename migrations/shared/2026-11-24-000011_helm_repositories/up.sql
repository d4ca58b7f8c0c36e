-- An organization's helm chart repositories; helm services name one as their source.
CREATE TABLE helm_repositories (
    id TEXT PRIMARY KEY NOT NULL,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    url TEXT NOT NULL,
    description TEXT,
    skip_tls_verification BOOLEAN NOT NULL,
    config TEXT NOT NULL,
    secret_config TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX helm_repositories_name ON helm_repositories(organization_id, name_key);

-- The repository a helm service's chart comes from, when it is one of the organization's.
ALTER TABLE services ADD COLUMN helm_repository_id TEXT REFERENCES helm_repositories(id);
CREATE INDEX services_helm_repository ON services(helm_repository_id);
