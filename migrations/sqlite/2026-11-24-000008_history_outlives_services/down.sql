-- Back to requests that go with their service: those of deleted services go now.
DELETE FROM deployment_requests WHERE service_id NOT IN (SELECT id FROM services);
