DROP TABLE cluster_logs;
