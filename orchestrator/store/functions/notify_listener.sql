-- A listener saved or changed: `orchestrator_listeners` notified with its name (on the row's insert or
-- update, 0001_store.sql's trigger `listeners_notify`). No process of the platform listens on it any more: the
-- router reads a listener version's declaration when a round first needs it (docs/decisions.md).
CREATE OR REPLACE FUNCTION orchestrator.notify_listener() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('orchestrator_listeners', NEW.name);
    RETURN NULL;
END
$$;
