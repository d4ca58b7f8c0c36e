DROP TABLE service_metadata_groups;
DROP TABLE metadata_groups;
