-- Whether one `where` condition holds on the value found (`core/filters.condition_holds`): a missing path (null)
-- never equals anything; values compare as JSON values; an order only between two numbers or two strings.
-- `prefix` and `contains` compare text as it is (`starts_with`, `strpos`): a value is never a pattern, so `%`,
-- `_` and `\` in it are plain characters. A list contains a value when a member equals it as JSON (never jsonb's
-- `@>`, which would take a list of members or a part of an object).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_holds(p_found jsonb, p_op text, p_value jsonb)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN p_op = 'exists' THEN (p_found IS NOT NULL) = (p_value = 'true'::jsonb)
        WHEN p_found IS NULL THEN p_op IN ('neq', 'not_in')
        WHEN p_op = 'eq' THEN p_found = p_value
        WHEN p_op = 'neq' THEN p_found <> p_value
        WHEN p_op = 'in' THEN EXISTS (SELECT 1 FROM jsonb_array_elements(p_value) x WHERE x = p_found)
        WHEN p_op = 'not_in' THEN NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p_value) x WHERE x = p_found)
        WHEN p_op = 'prefix' THEN jsonb_typeof(p_found) = 'string' AND jsonb_typeof(p_value) = 'string'
            AND starts_with((p_found #>> '{}') COLLATE "C", (p_value #>> '{}') COLLATE "C")
        WHEN p_op = 'contains' THEN CASE jsonb_typeof(p_found)
            WHEN 'string' THEN jsonb_typeof(p_value) = 'string'
                AND strpos((p_found #>> '{}') COLLATE "C", (p_value #>> '{}') COLLATE "C") > 0
            WHEN 'array' THEN EXISTS (SELECT 1 FROM jsonb_array_elements(p_found) x WHERE x = p_value)
            ELSE false END
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
