-- A lane key from the value at the key path (`core/lane_keys.lane_key`): a string as it is (its first
-- `p_segments` alias segments, when set), anything else as its canonical text; null when the path is missing.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_key_text(p_value jsonb, p_segments integer)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN p_value IS NULL THEN NULL
        WHEN jsonb_typeof(p_value) = 'string' AND p_segments IS NOT NULL
            THEN array_to_string((string_to_array(p_value #>> '{}', '/'))[1:p_segments], '/')
        WHEN jsonb_typeof(p_value) = 'string' THEN p_value #>> '{}'
        ELSE orchestrator.orchestrator_canonical(p_value)
    END
$$;
