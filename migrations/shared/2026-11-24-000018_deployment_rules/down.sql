DROP TABLE environment_deployment_rules;
DROP TABLE project_deployment_rules;
