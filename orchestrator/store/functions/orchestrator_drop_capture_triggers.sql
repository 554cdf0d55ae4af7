-- Takes a captured table's triggers off it. The table is named in the DDL by its schema and name, never by
-- regclass's text, which leaves out a schema the caller's search path holds.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_drop_capture_triggers(p_table regclass)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_name text := (SELECT format('%I.%I', n.nspname, k.relname)
                    FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace WHERE k.oid = p_table);
BEGIN
    EXECUTE format('DROP TRIGGER IF EXISTS orchestrator_capture_insert ON %s', v_name);
    EXECUTE format('DROP TRIGGER IF EXISTS orchestrator_capture_update ON %s', v_name);
    EXECUTE format('DROP TRIGGER IF EXISTS orchestrator_capture_delete ON %s', v_name);
    EXECUTE format('DROP TRIGGER IF EXISTS orchestrator_capture_truncate ON %s', v_name);
END
$$;
