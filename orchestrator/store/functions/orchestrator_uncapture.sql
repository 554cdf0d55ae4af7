-- Ends a capture: its trigger goes, its events stay.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_uncapture(p_table text)
RETURNS orchestrator.captures LANGUAGE plpgsql AS $$
DECLARE
    v_row orchestrator.captures%ROWTYPE;
BEGIN
    -- By the table as it is now, or by the name it had when the table is gone.
    DELETE FROM orchestrator.captures c
    WHERE c.table_oid = to_regclass(p_table)
       OR (c.table_name = p_table AND NOT EXISTS (SELECT 1 FROM pg_class k WHERE k.oid = c.table_oid))
    RETURNING * INTO v_row;
    IF FOUND AND EXISTS (SELECT 1 FROM pg_class k WHERE k.oid = v_row.table_oid) THEN
        PERFORM orchestrator.orchestrator_drop_capture_triggers(v_row.table_oid::regclass);
    END IF;
    RETURN v_row;
END
$$;
