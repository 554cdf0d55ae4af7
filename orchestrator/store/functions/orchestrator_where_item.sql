-- Whether a `where` item holds on an event: a condition ({root, rest, op, value}), or a group: `any` (one of its
-- items holds) or `not` (its item does not).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_where_item(e orchestrator.events, c jsonb)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
    i jsonb;
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
    END IF;
    RETURN orchestrator.orchestrator_holds(
        orchestrator.orchestrator_value(e, c ->> 'root', ARRAY(SELECT jsonb_array_elements_text(c -> 'rest'))),
            c ->> 'op', c -> 'value');
END
$$;
