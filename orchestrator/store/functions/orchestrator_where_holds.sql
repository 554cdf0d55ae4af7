-- Whether every `where` item of a rule holds on an event.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_where_holds(e orchestrator.events, p_conds jsonb)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
    c jsonb;
BEGIN
    FOR c IN SELECT x FROM jsonb_array_elements(p_conds) x LOOP
        IF NOT orchestrator.orchestrator_where_item(e, c) THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$$;
