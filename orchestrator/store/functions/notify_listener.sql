CREATE OR REPLACE FUNCTION orchestrator.notify_listener() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('orchestrator_listeners', NEW.name);
    RETURN NULL;
END
$$;
