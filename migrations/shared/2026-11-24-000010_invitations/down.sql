DROP TABLE invitations;
ALTER TABLE organization_members DROP COLUMN owner;
ALTER TABLE organization_members DROP COLUMN email;
