DROP INDEX deployment_requests_environment;
ALTER TABLE deployment_requests DROP COLUMN cancel_requested;
ALTER TABLE deployment_requests DROP COLUMN lease_until;
ALTER TABLE deployment_requests DROP COLUMN steps;
ALTER TABLE deployment_requests DROP COLUMN snapshot;
ALTER TABLE deployment_requests DROP COLUMN batch_id;
ALTER TABLE deployment_requests DROP COLUMN state;
