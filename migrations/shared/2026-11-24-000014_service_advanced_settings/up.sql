-- A service's advanced settings: only the values set on it (JSON object); the others are the
-- kind's defaults.
ALTER TABLE services ADD COLUMN advanced_settings TEXT NOT NULL DEFAULT '{}';
