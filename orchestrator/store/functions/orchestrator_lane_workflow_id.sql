-- A lane's workflow id (`core/lane_keys.lane_workflow_id`): its key as it is when short and plain, else `#` and
-- a sha256 prefix.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_lane_workflow_id(p_session text, p_listener text, p_key text)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT 'lane:' || p_session || ':' || p_listener || ':' || CASE
        WHEN length(p_key) <= 100 AND p_key ~ '^[A-Za-z0-9_./:@~-]+$' THEN p_key
        ELSE '#' || left(encode(sha256(convert_to(p_key, 'UTF8')), 'hex'), 32) END
$$;
