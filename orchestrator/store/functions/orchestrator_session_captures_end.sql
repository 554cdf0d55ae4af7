-- A session deleted (by `delete_session` or retention) ends the captures into it alone, in the same transaction:
-- their tables' writes would be refused from then on.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_session_captures_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM orchestrator.orchestrator_drop_capture_triggers(c.table_oid::regclass)
    FROM orchestrator.captures c WHERE c.session_id = NEW.id AND EXISTS (SELECT 1 FROM pg_class k
        WHERE k.oid = c.table_oid);
    DELETE FROM orchestrator.captures WHERE session_id = NEW.id;
    RETURN NULL;
END
$$;
