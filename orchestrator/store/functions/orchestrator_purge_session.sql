-- One step of a deleting session's removal: at most `p_limit` rows of the first table that still holds rows of
-- it, every table with a `session_id` column in turn (a table added later is covered), its lanes last (their
-- queues, runs, key slots and replays go with them), then the session itself. Answers the table and the rows
-- deleted, and `done` once the session is gone.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_purge_session(p_session text, p_limit integer)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_table text;
    v_count integer;
BEGIN
    -- The session's row before any of its rows, as the engine's functions take it (0002_lanes.sql's lock order).
    PERFORM 1 FROM orchestrator.sessions WHERE id = p_session FOR UPDATE;
    IF NOT EXISTS (SELECT 1 FROM orchestrator.sessions WHERE id = p_session AND status = 'deleting') THEN
        -- Gone already (done), or not being deleted (reopened before it was marked): nothing to do.
        RETURN jsonb_build_object('done', NOT EXISTS (SELECT 1 FROM orchestrator.sessions
            WHERE id = p_session), 'deleted', 0);
    END IF;
    FOR v_table IN
        SELECT c.relname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        WHERE c.relnamespace = 'orchestrator'::regnamespace AND c.relkind = 'r' AND a.attname = 'session_id'
          AND NOT a.attisdropped AND c.relname NOT IN ('sessions', 'session_retention', 'lanes')
        ORDER BY c.relname
    LOOP
        EXECUTE format('DELETE FROM %1$s.%2$I WHERE ctid = ANY (ARRAY(SELECT ctid FROM %1$s.%2$I'
                       ' WHERE session_id = $1 LIMIT $2))', 'orchestrator'::regnamespace, v_table)
            USING p_session, p_limit;
        GET DIAGNOSTICS v_count = ROW_COUNT;
        IF v_count > 0 THEN
            RETURN jsonb_build_object('table', v_table, 'deleted', v_count, 'done', false);
        END IF;
    END LOOP;
    DELETE FROM orchestrator.lanes WHERE ctid = ANY (ARRAY(SELECT ctid FROM orchestrator.lanes
        WHERE session_id = p_session LIMIT p_limit));
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count > 0 THEN
        RETURN jsonb_build_object('table', 'lanes', 'deleted', v_count, 'done', false);
    END IF;
    -- Its write rate's bucket (0004_keys.sql) names it in its key rather than a column.
    DELETE FROM orchestrator.rate_buckets WHERE bucket = 'session:' || p_session;
    -- Where the routers' poll stopped (0030), if at this session: its row taken first, so that a poll in progress,
    -- which read the session before its routing stopped, has saved where it stopped; none after it can find it.
    PERFORM 1 FROM orchestrator.routing_poll FOR UPDATE;
    UPDATE orchestrator.routing_poll SET after = '' WHERE after = p_session;
    DELETE FROM orchestrator.sessions WHERE id = p_session;
    RETURN jsonb_build_object('table', 'sessions', 'deleted', 1, 'done', true);
END
$$;
