ALTER TABLE cluster_daemons DROP COLUMN kind;
