-- A service's deployment requests outlive it: histories show every deployment a client made,
-- the deletion of a service included. They still go with their environment.
ALTER TABLE deployment_requests DROP CONSTRAINT IF EXISTS deployment_requests_service_id_fkey;
