DROP TABLE cluster_daemons;
