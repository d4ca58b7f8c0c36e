ALTER TABLE git_tokens DROP COLUMN expired_at;
