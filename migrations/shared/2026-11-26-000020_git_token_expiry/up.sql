-- The day a git token expires, when its client said (YYYY-MM-DD); tokens stored before, and
-- those sent without it, have none.
ALTER TABLE git_tokens ADD COLUMN expired_at TEXT;
