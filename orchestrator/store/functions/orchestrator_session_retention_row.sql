-- A session's retention row: made with the session; a change of its status (closed, reopened, being deleted)
-- brings its next look forward to now, for what its new status keeps (0003_retention.sql's triggers).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_session_retention_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO orchestrator.session_retention (session_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    ELSE
        -- Closed (or reopened, or being deleted): looked at again now, for what its new status keeps.
        UPDATE orchestrator.session_retention SET due_at = least(due_at, clock_timestamp()) WHERE session_id = NEW.id;
    END IF;
    RETURN NULL;
END
$$;
