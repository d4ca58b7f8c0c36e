DROP TABLE organization_members;
