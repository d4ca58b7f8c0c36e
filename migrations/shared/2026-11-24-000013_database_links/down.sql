DROP INDEX variables_linked_database;
ALTER TABLE variables DROP COLUMN linked_database_id;
