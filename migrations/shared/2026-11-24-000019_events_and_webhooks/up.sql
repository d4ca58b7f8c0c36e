-- The event log: every event is written in the unit of the change it tells of; `position`
-- (its place in the stream) is given after commit by one sequencer at a time, in the order
-- events became visible. event_type is NULL for a deployment's progress (streamed, not
-- audited). body holds the whole event as JSON; the other columns are what filters read.
-- organization_id has no foreign key on purpose: units that hold an environment write events,
-- and a key check would make them wait on an organization's deletion while it waits on them
-- (a deadlock); the deletion removes the organization's events itself.
CREATE TABLE events (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    position BIGINT,
    created_at TIMESTAMP NOT NULL,
    event_type TEXT,
    target_type TEXT NOT NULL,
    target_id TEXT,
    sub_target_type TEXT,
    origin TEXT NOT NULL,
    triggered_by TEXT NOT NULL,
    project_id TEXT,
    environment_id TEXT,
    body TEXT NOT NULL
);
CREATE UNIQUE INDEX events_position ON events(position);
CREATE INDEX events_unsequenced ON events(created_at, id) WHERE position IS NULL;
CREATE INDEX events_audit ON events(organization_id, created_at);
CREATE INDEX events_stream ON events(organization_id, position);

CREATE TABLE organization_webhooks (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    target_url TEXT NOT NULL,
    -- Encrypted with CAPSTAN_SECRET_KEY.
    target_secret TEXT,
    description TEXT,
    enabled BOOLEAN NOT NULL,
    events TEXT NOT NULL,
    project_names_filter TEXT NOT NULL,
    environment_types_filter TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX organization_webhooks_organization ON organization_webhooks(organization_id);

-- One event on its way to one webhook (at most one per pair); claimed by a sender until
-- lease_until, like the deployment queue.
CREATE TABLE webhook_deliveries (
    id TEXT PRIMARY KEY,
    webhook_id TEXT NOT NULL REFERENCES organization_webhooks(id) ON DELETE CASCADE,
    organization_id TEXT NOT NULL,
    event_id TEXT NOT NULL REFERENCES events(id) ON DELETE CASCADE,
    matched_event TEXT NOT NULL,
    payload TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    next_attempt_at TIMESTAMP NOT NULL,
    claimed_by TEXT,
    lease_until TIMESTAMP,
    created_at TIMESTAMP NOT NULL,
    UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at) WHERE state = 'PENDING';
CREATE INDEX webhook_deliveries_event ON webhook_deliveries(event_id);

-- The delivery log: one row per attempt.
CREATE TABLE webhook_attempts (
    id TEXT PRIMARY KEY,
    delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    webhook_id TEXT NOT NULL REFERENCES organization_webhooks(id) ON DELETE CASCADE,
    organization_id TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    kind TEXT NOT NULL,
    matched_event TEXT NOT NULL,
    target_url TEXT NOT NULL,
    request TEXT NOT NULL,
    status_code INTEGER NOT NULL,
    response_body TEXT,
    error TEXT,
    duration_ms BIGINT NOT NULL,
    attempt INTEGER NOT NULL
);
CREATE INDEX webhook_attempts_webhook ON webhook_attempts(webhook_id, created_at);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts(delivery_id);
