-- A database's connection variables (BUILT_IN) given to an application of its environment: the
-- link between the two. They go with the database, with the application, or when the link is
-- removed.
ALTER TABLE variables ADD COLUMN linked_database_id TEXT REFERENCES services(id) ON DELETE CASCADE;
CREATE INDEX variables_linked_database ON variables(linked_database_id);
