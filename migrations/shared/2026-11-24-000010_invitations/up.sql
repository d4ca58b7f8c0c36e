-- What a member was invited as (their email), and which member owns the organization.
ALTER TABLE organization_members ADD COLUMN email TEXT;
ALTER TABLE organization_members ADD COLUMN owner BOOLEAN NOT NULL DEFAULT FALSE;

-- Invitations waiting for their user: one per email and organization (compared lowercased).
CREATE TABLE invitations (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    email TEXT NOT NULL,
    email_key TEXT NOT NULL,
    role TEXT NOT NULL,
    inviter TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    UNIQUE (organization_id, email_key)
);
