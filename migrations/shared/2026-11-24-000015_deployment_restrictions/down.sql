DROP TABLE deployment_restrictions;
