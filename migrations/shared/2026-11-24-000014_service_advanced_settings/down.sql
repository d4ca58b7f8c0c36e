ALTER TABLE services DROP COLUMN advanced_settings;
