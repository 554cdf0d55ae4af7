-- Takes a captured table's triggers off it, the table named in the DDL by `orchestrator_table_name`.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_drop_capture_triggers(p_table regclass)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_name text := orchestrator.orchestrator_table_name(p_table);
BEGIN
    EXECUTE format('DROP TRIGGER IF EXISTS orchestrator_capture_insert ON %s', v_name);
    EXECUTE format('DROP TRIGGER IF EXISTS orchestrator_capture_update ON %s', v_name);
    EXECUTE format('DROP TRIGGER IF EXISTS orchestrator_capture_delete ON %s', v_name);
    EXECUTE format('DROP TRIGGER IF EXISTS orchestrator_capture_truncate ON %s', v_name);
END
$$;
