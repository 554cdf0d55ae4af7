-- A commit time as the envelope writes it (core/events.py, core/paths.py): UTC, microseconds only when there
-- are any, and a `Z`.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_created_text(p_at timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
        || CASE WHEN extract(microseconds FROM p_at)::bigint % 1000000 = 0 THEN ''
                ELSE '.' || to_char(p_at AT TIME ZONE 'UTC', 'US') END || 'Z'
$$;
