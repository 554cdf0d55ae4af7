-- The alias heads an event offers: those of each of its places ('' always).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_place_heads(p_alias text, p_graph jsonb)
RETURNS text[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_heads text[] := ARRAY[''];
    v_place text;
BEGIN
    IF p_alias IS NOT NULL THEN
        RETURN orchestrator.orchestrator_heads(p_alias, '/');
    END IF;
    FOREACH v_place IN ARRAY orchestrator.orchestrator_places(p_alias, p_graph) LOOP
        v_heads := v_heads || (SELECT array_agg(h) FROM unnest(orchestrator.orchestrator_heads(v_place, '/')) h
                               WHERE h <> ALL (v_heads));
    END LOOP;
    RETURN v_heads;
END
$$;
