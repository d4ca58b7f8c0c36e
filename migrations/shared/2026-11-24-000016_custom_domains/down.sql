DROP TABLE custom_domains;
