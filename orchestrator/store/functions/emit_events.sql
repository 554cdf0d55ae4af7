-- Appends the events (`[{type, data, client?, key?}]`) to the session, in order, all or none; answers their ids
-- (a key seen before answers the first event's; one held for another type is refused). Each type must be declared
-- and each `data` an object; the type's JSON schema is checked by the caller (the platform's commands and Python
-- helpers), not here. An application calls it in its own transaction (docs/transactions.md): the events commit or
-- roll back with its change, and the router sees them only once committed. Every name below carries the platform's
-- schema, so it works from any caller's search path.
CREATE OR REPLACE FUNCTION orchestrator.emit_events(p_session text, p_events jsonb) RETURNS TABLE (event_id bigint)
LANGUAGE plpgsql AS $$
BEGIN
    IF jsonb_typeof(p_events) = 'array' AND jsonb_array_length(p_events) > 10000 THEN
        RAISE EXCEPTION 'events: at most 10000 in one call, not %', jsonb_array_length(p_events)
            USING ERRCODE = '22023';
    END IF;
    RETURN QUERY SELECT e.event_id FROM orchestrator.orchestrator_emit_checked(p_session, p_events) e;
END
$$;
