-- The pull request a preview environment follows (JSON: provider, repository, number, head,
-- blueprint, comment, last activity); NULL for every other environment.
ALTER TABLE environments ADD COLUMN pull_request TEXT;
