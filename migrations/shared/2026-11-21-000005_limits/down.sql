DROP TABLE idempotency_keys;
DROP TABLE rate_limits;
