-- Which changed paths of a push deploy a service: MATCH or EXCLUDE a path, once each.
CREATE TABLE deployment_restrictions (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    service_id TEXT NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    mode TEXT NOT NULL,
    restriction_type TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    UNIQUE (service_id, mode, restriction_type, value)
);
