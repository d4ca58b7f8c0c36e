DROP TABLE deployment_logs;
