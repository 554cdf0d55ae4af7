-- Whether one `where` condition holds on the value found (`core/filters.condition_holds`): a missing path (null)
-- never equals anything; values compare as JSON values; an order only between two numbers or two strings.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_holds(p_found jsonb, p_op text, p_value jsonb)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN p_op = 'exists' THEN (p_found IS NOT NULL) = (p_value = 'true'::jsonb)
        WHEN p_found IS NULL THEN p_op IN ('neq', 'not_in')
        WHEN p_op = 'eq' THEN p_found = p_value
        WHEN p_op = 'neq' THEN p_found <> p_value
        WHEN p_op = 'in' THEN EXISTS (SELECT 1 FROM jsonb_array_elements(p_value) x WHERE x = p_found)
        WHEN p_op = 'not_in' THEN NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p_value) x WHERE x = p_found)
        WHEN jsonb_typeof(p_found) = 'number' AND jsonb_typeof(p_value) = 'number' THEN CASE p_op
            WHEN 'gt' THEN (p_found #>> '{}')::numeric > (p_value #>> '{}')::numeric
            WHEN 'gte' THEN (p_found #>> '{}')::numeric >= (p_value #>> '{}')::numeric
            WHEN 'lt' THEN (p_found #>> '{}')::numeric < (p_value #>> '{}')::numeric
            ELSE (p_found #>> '{}')::numeric <= (p_value #>> '{}')::numeric END
        WHEN jsonb_typeof(p_found) = 'string' AND jsonb_typeof(p_value) = 'string' THEN CASE p_op
            WHEN 'gt' THEN (p_found #>> '{}') COLLATE "C" > (p_value #>> '{}') COLLATE "C"
            WHEN 'gte' THEN (p_found #>> '{}') COLLATE "C" >= (p_value #>> '{}') COLLATE "C"
            WHEN 'lt' THEN (p_found #>> '{}') COLLATE "C" < (p_value #>> '{}') COLLATE "C"
            ELSE (p_found #>> '{}') COLLATE "C" <= (p_value #>> '{}') COLLATE "C" END
        ELSE false
    END
$$;
