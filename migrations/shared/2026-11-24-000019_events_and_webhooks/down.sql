DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE organization_webhooks;
DROP TABLE events;
