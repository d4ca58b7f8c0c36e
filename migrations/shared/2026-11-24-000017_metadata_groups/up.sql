-- Labels and annotations groups of an organization (names unique per organization and kind),
-- and the services they are attached to: a group still attached cannot be deleted.
CREATE TABLE metadata_groups (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    entries TEXT NOT NULL,
    scopes TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    UNIQUE (organization_id, kind, name_key)
);
CREATE TABLE service_metadata_groups (
    service_id TEXT NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    group_id TEXT NOT NULL REFERENCES metadata_groups(id),
    PRIMARY KEY (service_id, group_id)
);
CREATE INDEX service_metadata_groups_group ON service_metadata_groups(group_id);
