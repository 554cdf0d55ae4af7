-- Routers and streams wake on these instead of polling: one notification per session per committing
-- transaction (PostgreSQL folds identical notifications of one transaction into one), raised once per
-- statement (a trigger call per row cost a bulk write of a thousand events 6 us an event).
CREATE OR REPLACE FUNCTION orchestrator.notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('orchestrator_events', s.session_id) FROM (SELECT DISTINCT session_id FROM written) s;
    RETURN NULL;
END
$$;
