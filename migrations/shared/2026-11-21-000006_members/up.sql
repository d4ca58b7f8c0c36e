-- The users (JWT subjects) of each organization and their role. The creator of an organization
-- is its ADMIN; `capstan member add` adds others.
CREATE TABLE organization_members (
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    role TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX organization_members_user ON organization_members(user_id);
