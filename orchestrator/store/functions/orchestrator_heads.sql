-- The heads a value offers a probe: '' and each run of its first segments ('a', 'a.b', 'a.b.c' for a type).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_heads(p_value text, p_sep text)
RETURNS text[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_heads text[] := ARRAY[''];
    v_head text;
    v_part text;
BEGIN
    IF p_value IS NULL THEN
        RETURN v_heads;
    END IF;
    FOREACH v_part IN ARRAY string_to_array(p_value, p_sep) LOOP
        v_head := CASE WHEN v_head IS NULL THEN v_part ELSE v_head || p_sep || v_part END;
        v_heads := v_heads || v_head;
    END LOOP;
    RETURN v_heads;
END
$$;
