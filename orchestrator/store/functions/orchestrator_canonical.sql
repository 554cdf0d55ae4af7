-- A value's identity as text (`core/paths.canonical_json`): compact, keys sorted by code point, numbers in plain
-- notation with no trailing zeros.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_canonical(p_value jsonb)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_text text;
BEGIN
    CASE jsonb_typeof(p_value)
        WHEN 'object' THEN
            SELECT '{' || coalesce(string_agg(to_jsonb(k)::text || ':' || orchestrator.orchestrator_canonical(x), ','
                                              ORDER BY k COLLATE "C"), '') || '}'
                INTO v_text FROM jsonb_each(p_value) AS j(k, x);
        WHEN 'array' THEN
            SELECT '[' || coalesce(string_agg(orchestrator.orchestrator_canonical(x), ',' ORDER BY n), '') || ']'
                INTO v_text FROM jsonb_array_elements(p_value) WITH ORDINALITY AS j(x, n);
        WHEN 'number' THEN
            v_text := trim_scale((p_value #>> '{}')::numeric)::text;
        ELSE
            v_text := p_value::text;
    END CASE;
    RETURN v_text;
END
$$;
