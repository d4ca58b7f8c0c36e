ALTER TABLE deployment_requests DROP COLUMN origin;
ALTER TABLE deployment_requests DROP COLUMN position;
DROP TABLE deployment_stage_services;
DROP TABLE deployment_stages;
