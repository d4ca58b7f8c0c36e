DROP TABLE variables;
ALTER TABLE services DROP COLUMN deployment_status;
