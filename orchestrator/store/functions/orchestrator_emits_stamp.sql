-- At the commit of an application's transaction that emitted into a session (`orchestrator_emit_checked`, the
-- deferred trigger of 0036_emits_stamped_at_commit.sql): the events its emits appended there take the commit's
-- time, and the note goes. The note is read as it stands now (later emits of the transaction added to it since
-- the insert that queued this).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_emits_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_ids int8multirange;
    v_now timestamptz := clock_timestamp();  -- one time for the commit's events
BEGIN
    DELETE FROM orchestrator.emits_unstamped WHERE session_id = NEW.session_id AND tx = NEW.tx RETURNING ids
        INTO v_ids;
    IF v_ids IS NOT NULL THEN
        UPDATE orchestrator.events SET created_at = v_now
            WHERE session_id = NEW.session_id AND id >= lower(v_ids) AND id < upper(v_ids) AND id <@ v_ids;
    END IF;
    RETURN NULL;
END
$$;
