-- What services' workloads print, masked before it is written. A line is known by its service,
-- replica and position (the engine's time of it), so two readers of one output keep it once;
-- only each service's newest lines are kept, and they go with the service.
CREATE TABLE service_output (
    service_id TEXT NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    replica TEXT NOT NULL,
    position BIGINT NOT NULL,
    id TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    request_id TEXT,
    version TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    stream TEXT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (service_id, replica, position)
);
CREATE INDEX service_output_newest ON service_output(service_id, position);
