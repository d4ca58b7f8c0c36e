-- What an engine last saw run of each service: its state, its replicas (JSON) and where its
-- ports are published (JSON). One row a service, replaced at each report; it goes with the
-- service.
CREATE TABLE running_states (
    service_id TEXT PRIMARY KEY NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    environment_id TEXT NOT NULL,
    state TEXT NOT NULL,
    replicas TEXT NOT NULL,
    endpoints TEXT NOT NULL,
    observed_at TIMESTAMP NOT NULL
);
CREATE INDEX running_states_environment ON running_states(environment_id);
