-- A database's backups: the dump is kept by the engine under the backup's id; the record says
-- how taking it went. They go with their database.
CREATE TABLE database_backups (
    id TEXT PRIMARY KEY NOT NULL,
    organization_id TEXT NOT NULL,
    database_id TEXT NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    message TEXT NOT NULL,
    state TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    reason TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX database_backups_database ON database_backups(database_id, created_at);
