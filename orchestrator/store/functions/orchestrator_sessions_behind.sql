-- The slow poll's question: up to `p_limit` sessions whose stream has events the router has not routed, in id
-- order after the session the last poll stopped at (then from the start), so that every session behind is
-- reached in turn however many are behind at once. One poll per `p_every` seconds for the deployment, whichever
-- router asks (0030): a router that asks sooner, or while another's poll runs, is answered none. `p_every` 0 asks
-- at once (a router that has just listened again, having missed what was notified meanwhile).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_sessions_behind(p_every double precision, p_limit integer)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    v_after text;
    v_found text[];
BEGIN
    -- The row is made by the first poll (a database emptied by its tables' truncation has none).
    INSERT INTO orchestrator.routing_poll DEFAULT VALUES ON CONFLICT DO NOTHING;
    SELECT p.after INTO v_after FROM orchestrator.routing_poll p
        WHERE p.polled_at <= clock_timestamp() - make_interval(secs => p_every) FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_found := ARRAY(
        SELECT s.id FROM orchestrator.sessions s JOIN orchestrator.routing_cursors c ON c.session_id = s.id
        WHERE s.last_event_id > c.routed_event_id
        ORDER BY s.id <= v_after, s.id LIMIT p_limit);
    UPDATE orchestrator.routing_poll
        SET after = coalesce(v_found[cardinality(v_found)], v_after), polled_at = clock_timestamp();
    RETURN QUERY SELECT unnest(v_found);
END
$$;
