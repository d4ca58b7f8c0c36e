ALTER TABLE environments DROP COLUMN pull_request;
