-- Declares a table's changes events: checks the table (`orchestrator_capture_check`), records the capture and puts
-- its triggers on it. Names arrive as bound values and reach DDL only through format's %I and %s of a regnamespace
-- (quoted as needed).
-- `p_table` comes qualified (`schema.table`: commands/captures.py), and the capture keeps it as `schema.table`
-- whatever the caller's search path.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_capture(
    p_table text, p_prefix text, p_session_column text, p_session text, p_exclude text[]
) RETURNS orchestrator.captures LANGUAGE plpgsql AS $$
DECLARE
    v_table regclass := to_regclass(p_table);
    v_name text;
    v_id text;
    v_row orchestrator.captures%ROWTYPE;
BEGIN
    v_id := orchestrator.orchestrator_capture_check(p_table, p_session_column, p_exclude);
    v_name := orchestrator.orchestrator_table_name(v_table);
    -- The captures of tables dropped since (an application's migration that drops and makes a table again).
    DELETE FROM orchestrator.captures c WHERE NOT EXISTS (SELECT 1 FROM pg_class k WHERE k.oid = c.table_oid);
    INSERT INTO orchestrator.captures (table_oid, table_name, type_prefix, id_column, session_column, session_id,
        exclude)
    VALUES (v_table, v_name, p_prefix, v_id, p_session_column, p_session, coalesce(p_exclude, '{}'))
    ON CONFLICT (table_oid) DO UPDATE SET table_name = EXCLUDED.table_name, type_prefix = EXCLUDED.type_prefix,
        id_column = EXCLUDED.id_column, session_column = EXCLUDED.session_column, session_id = EXCLUDED.session_id,
        exclude = EXCLUDED.exclude, saved_at = clock_timestamp()
    RETURNING * INTO v_row;
    PERFORM orchestrator.orchestrator_capture_triggers(v_table);
    RETURN v_row;
END
$$;
