-- Whether a `where` item holds on an event: a condition ({root, rest, op, value}), or a group: `any` (one of its
-- items holds) or `not` (its item does not). An ordering of `created_at` with an instant compares instants.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_where_item(e orchestrator.events, c jsonb)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
    i jsonb;
    v_at timestamptz;
BEGIN
    IF c ->> 'op' = 'any' THEN
        FOR i IN SELECT x FROM jsonb_array_elements(c -> 'items') x LOOP
            IF orchestrator.orchestrator_where_item(e, i) THEN
                RETURN true;
            END IF;
        END LOOP;
        RETURN false;
    ELSIF c ->> 'op' = 'not' THEN
        RETURN NOT orchestrator.orchestrator_where_item(e, c -> 'item');
    ELSIF c ->> 'root' = 'created_at' AND c ->> 'op' IN ('gt', 'gte', 'lt', 'lte') THEN
        v_at := orchestrator.orchestrator_instant(c -> 'value');
        IF v_at IS NOT NULL THEN
            RETURN CASE c ->> 'op' WHEN 'gt' THEN e.created_at > v_at WHEN 'gte' THEN e.created_at >= v_at
                WHEN 'lt' THEN e.created_at < v_at ELSE e.created_at <= v_at END;
        END IF;
    END IF;
    RETURN orchestrator.orchestrator_holds(
        orchestrator.orchestrator_value(e, c ->> 'root', ARRAY(SELECT jsonb_array_elements_text(c -> 'rest'))),
            c ->> 'op', c -> 'value');
END
$$;
