-- Rate limits shared by every server process: the GCRA "theoretical arrival time" per key
-- (principal or client address), in microseconds since the Unix epoch.
CREATE TABLE rate_limits (
    key TEXT PRIMARY KEY NOT NULL,
    tat BIGINT NOT NULL
);
-- Safe retries: the first answer to a POST with an Idempotency-Key, per principal, for 24 hours.
-- response_body is encrypted by the application (it may hold a token shown once).
CREATE TABLE idempotency_keys (
    principal TEXT NOT NULL,
    key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status INTEGER,
    response_body TEXT,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);
