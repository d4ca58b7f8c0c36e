ALTER TABLE cloud_credentials DROP COLUMN details;
