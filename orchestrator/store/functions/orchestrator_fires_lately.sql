-- How often a listener fired in a session in the minute before `p_now`, and when the oldest of those fires was
-- (no row: none). The newest fire is inside the minute whenever the oldest is.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_fires_lately(p_session text, p_listener text, p_now timestamptz)
RETURNS TABLE (fires bigint, oldest timestamptz) LANGUAGE sql STABLE AS $$
    SELECT n.fire_seq - f.fire_seq + 1, f.created_at
    FROM (SELECT b.fire_seq, b.created_at FROM orchestrator.batches b
          WHERE b.session_id = p_session AND b.listener = p_listener AND b.counted
            AND b.created_at > p_now - interval '60 seconds'
          ORDER BY b.created_at LIMIT 1) f
    CROSS JOIN (SELECT b.fire_seq FROM orchestrator.batches b
                WHERE b.session_id = p_session AND b.listener = p_listener AND b.counted
                ORDER BY b.created_at DESC LIMIT 1) n
$$;
