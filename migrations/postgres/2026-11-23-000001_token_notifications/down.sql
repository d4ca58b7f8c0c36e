DROP TRIGGER api_tokens_changed ON api_tokens;
DROP FUNCTION capstan_tokens_changed();
