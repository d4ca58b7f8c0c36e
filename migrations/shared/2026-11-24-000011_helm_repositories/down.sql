DROP INDEX services_helm_repository;
ALTER TABLE services DROP COLUMN helm_repository_id;
DROP TABLE helm_repositories;
