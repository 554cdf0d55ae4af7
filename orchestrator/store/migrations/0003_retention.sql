-- Retention (SPEC section 14): a lane's queue holds what waits, a session keeps its history for a time, and a
-- session can be deleted with everything of it.
--
-- Queue rows go with the lane's own batch that takes them, in the statement that records it (a trigger on the
-- batch's insert, so the lane functions of 0002 stay as they are); the batch keeps its event ids and when each
-- was queued (`queued_at`, in the order of `event_ids`), which is what `explain_event` and the crash suite read
-- of an event's trip once its queue row is gone.
--
-- What a session keeps is driven by one row per session (`session_retention`): its own retention (null: the
-- deployment's), how far its stream is trimmed, and when a worker should look at it next. Workers take due
-- rows with SKIP LOCKED and a lease, and delete in short statements of a bounded number of rows: no lock is
-- held on the session's row (every write takes it) and none for longer than one statement.

-- -- queues that hold what waits -------------------------------------------------------------------------

ALTER TABLE batches ADD COLUMN queued_at timestamptz[];

CREATE FUNCTION orchestrator_take_queue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The lane's own batch (not a repeat, not a replay), recorded after its lane's `fired_through` moved past
    -- it: every queue row at or below that is consumed.
    IF NEW.retry = 0 AND NEW.replay = 0 THEN
        WITH gone AS (
            DELETE FROM lane_events q USING lanes l
            WHERE l.id = NEW.lane_id AND q.lane_id = l.id AND q.event_id <= l.fired_through
            RETURNING q.event_id, q.queued_at)
        SELECT array_agg(g.queued_at ORDER BY x.n) INTO NEW.queued_at
        FROM unnest(NEW.event_ids) WITH ORDINALITY AS x(id, n) LEFT JOIN gone g ON g.event_id = x.id;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER batches_take_queue BEFORE INSERT ON batches FOR EACH ROW EXECUTE FUNCTION orchestrator_take_queue();

-- What earlier versions left behind: queue rows of events their lanes have fired.
DELETE FROM lane_events q USING lanes l WHERE q.lane_id = l.id AND q.event_id <= l.fired_through;

-- The batches that took an event (`explain_event`, what it caused) and those a trim may delete, by session.
CREATE INDEX batches_session_last ON batches (session_id, last_id);
