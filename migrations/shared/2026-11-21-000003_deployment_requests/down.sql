DROP TABLE deployment_requests;
