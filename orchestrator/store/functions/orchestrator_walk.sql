-- A dotted path's rest inside a value (`core/paths.resolve`): an object's key, a list's index (digits only),
-- and a null anywhere is missing (SQL null).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_walk(p_value jsonb, p_rest text[])
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v jsonb := p_value;
    v_segment text;
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        RETURN NULL;
    END IF;
    FOREACH v_segment IN ARRAY p_rest LOOP
        CASE jsonb_typeof(v)
            WHEN 'object' THEN
                v := v -> v_segment;
            WHEN 'array' THEN
                IF v_segment !~ '^[0-9]{1,9}$' THEN
                    RETURN NULL;
                END IF;
                v := v -> v_segment::integer;
            ELSE
                RETURN NULL;
        END CASE;
        IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
            RETURN NULL;
        END IF;
    END LOOP;
    RETURN v;
END
$$;
