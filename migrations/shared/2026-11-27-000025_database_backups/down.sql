DROP TABLE database_backups;
