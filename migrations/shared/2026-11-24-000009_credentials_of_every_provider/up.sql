-- The public members of credentials of every provider and kind, as JSON (the secret stays in
-- secret_access_key, encrypted). Rows from before hold cloudA access keys: '{}' reads as one.
ALTER TABLE cloud_credentials ADD COLUMN details TEXT NOT NULL DEFAULT '{}';
