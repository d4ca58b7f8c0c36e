-- When each deployed cron job runs next: set when its deployment succeeds, taken (and moved
-- to the following time) by the scheduler that queues the run; it goes with its job.
CREATE TABLE cron_turns (
    service_id TEXT PRIMARY KEY NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    environment_id TEXT NOT NULL,
    next_run_at TIMESTAMP NOT NULL
);
CREATE INDEX cron_turns_next ON cron_turns(next_run_at);
