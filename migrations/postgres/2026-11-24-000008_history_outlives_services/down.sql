DELETE FROM deployment_requests WHERE service_id NOT IN (SELECT id FROM services);
ALTER TABLE deployment_requests ADD CONSTRAINT deployment_requests_service_id_fkey
    FOREIGN KEY (service_id) REFERENCES services(id) ON DELETE CASCADE;
