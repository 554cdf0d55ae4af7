-- Puts a captured table's triggers on it: a row trigger for each change (`orchestrator_captured_row`), and one
-- that refuses `TRUNCATE` (it names no rows, so it would leave no events). The table is named in the DDL by
-- `orchestrator_table_name`.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_capture_triggers(p_table regclass)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_name text := orchestrator.orchestrator_table_name(p_table);
BEGIN
    PERFORM orchestrator.orchestrator_drop_capture_triggers(p_table);
    EXECUTE format('CREATE TRIGGER orchestrator_capture_insert AFTER INSERT ON %s'
        ' FOR EACH ROW EXECUTE FUNCTION %s.orchestrator_captured_row()', v_name, 'orchestrator'::regnamespace);
    EXECUTE format('CREATE TRIGGER orchestrator_capture_update AFTER UPDATE ON %s'
        ' FOR EACH ROW EXECUTE FUNCTION %s.orchestrator_captured_row()', v_name, 'orchestrator'::regnamespace);
    EXECUTE format('CREATE TRIGGER orchestrator_capture_delete AFTER DELETE ON %s'
        ' FOR EACH ROW EXECUTE FUNCTION %s.orchestrator_captured_row()', v_name, 'orchestrator'::regnamespace);
    EXECUTE format('CREATE TRIGGER orchestrator_capture_truncate BEFORE TRUNCATE ON %s'
        ' FOR EACH STATEMENT EXECUTE FUNCTION %s.orchestrator_refuse_truncate()', v_name, 'orchestrator'::regnamespace);
END
$$;
