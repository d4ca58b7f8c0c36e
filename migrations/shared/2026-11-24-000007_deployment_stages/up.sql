-- Deployment stages: an environment's deployment runs them one after another, in
-- deployment_order. Every service is in exactly one stage of its environment; a stage that still
-- holds services cannot be deleted (NO ACTION -> 409).
CREATE TABLE deployment_stages (
    id TEXT PRIMARY KEY NOT NULL,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    environment_id TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    description TEXT,
    deployment_order INTEGER NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX deployment_stages_name ON deployment_stages(environment_id, name_key);
CREATE INDEX deployment_stages_order ON deployment_stages(environment_id, deployment_order);

CREATE TABLE deployment_stage_services (
    service_id TEXT PRIMARY KEY NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    stage_id TEXT NOT NULL REFERENCES deployment_stages(id),
    environment_id TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
    is_skipped BOOLEAN NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX deployment_stage_services_stage ON deployment_stage_services(stage_id);
CREATE INDEX deployment_stage_services_environment ON deployment_stage_services(environment_id);

-- Environments that existed before stages get their default stage (its id is the
-- environment's: ids need only be unique within a table) holding every service they have.
INSERT INTO deployment_stages
    (id, organization_id, environment_id, name, name_key, description, deployment_order, created_at, updated_at)
SELECT id, organization_id, id, 'DEFAULT', 'default', NULL, 1, created_at, created_at FROM environments;
INSERT INTO deployment_stage_services
    (service_id, id, stage_id, environment_id, is_skipped, created_at, updated_at)
SELECT id, id, environment_id, environment_id, FALSE, created_at, created_at FROM services;

-- A request's place in its batch: the deployment order of its service's stage when it was asked
-- for. Requests of one environment run in (created_at, position, id) order, so a batch runs
-- stage by stage.
ALTER TABLE deployment_requests ADD COLUMN position INTEGER NOT NULL DEFAULT 0;
-- Where the request came from (API, CLI, TERRAFORM_PROVIDER, GIT, ...), for histories and queues.
ALTER TABLE deployment_requests ADD COLUMN origin TEXT NOT NULL DEFAULT 'API';
