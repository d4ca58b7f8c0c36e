-- Servers sharing this database remember the API tokens they found; every change to the
-- tokens (deleted one by one, or with their organization) tells them all to forget.
CREATE FUNCTION capstan_tokens_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('capstan_tokens', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER api_tokens_changed
    AFTER UPDATE OR DELETE OR TRUNCATE ON api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION capstan_tokens_changed();
