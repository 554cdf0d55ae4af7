-- At the commit of an application's transaction that emitted into a session (`orchestrator_emit_checked`, the
-- deferred trigger of 0037_emits_stamped_at_commit.sql): what it appended there from its first emit on, captured
-- changes appended under its lock among it, takes the commit's time, and the note goes.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_emits_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE orchestrator.events SET created_at = clock_timestamp()
        WHERE session_id = NEW.session_id AND id >= NEW.first_id;
    DELETE FROM orchestrator.emits_unstamped WHERE session_id = NEW.session_id;
    RETURN NULL;
END
$$;
