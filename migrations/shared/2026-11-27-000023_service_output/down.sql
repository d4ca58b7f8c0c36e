DROP TABLE service_output;
