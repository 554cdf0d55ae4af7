-- Routers are woken once per session while they have not caught up, not once per committing transaction.
--
-- Every transaction that raised a notification took PostgreSQL's lock for notifying commits (one for the whole
-- server, held from the commit's start until its end, WAL flush included): notifying writers committed one at a
-- time, never sharing a flush. `python -m bench.app_transactions --cases cost`, 8 writers a session each, a row
-- per transaction: captured inserts 0.24x plain with a notification at each commit, 0.49x without (a loaded
-- machine, both in one run).
--
-- Now a session's row says when its routers were last told (`woken_at`): a writer raises a notification only when
-- they were not told since their last round caught up (`woken_at` null), or were told more than a second ago (a
-- router that died before it caught up costs a second, not the slow poll); a router that caught up clears it
-- (`orchestrator_wake_rearm`), and one that has not comes back on its own. Writers update the session's row under
-- its lock anyway (`last_event_id`), so the decision costs no statement: a trigger's `WHEN` that calls nothing
-- unless a notification is due.
ALTER TABLE orchestrator.sessions ADD COLUMN woken_at timestamptz;

DROP TRIGGER events_notify ON orchestrator.events;
DROP FUNCTION orchestrator.notify_events();

CREATE FUNCTION orchestrator.wake_routers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.woken_at := clock_timestamp();
    PERFORM pg_notify('orchestrator_events', NEW.id);
    RETURN NEW;
END
$$;

CREATE TRIGGER sessions_wake BEFORE UPDATE OF last_event_id ON orchestrator.sessions
    FOR EACH ROW WHEN (NEW.last_event_id > OLD.last_event_id
                       AND (OLD.woken_at IS NULL OR OLD.woken_at < clock_timestamp() - interval '1 second'))
    EXECUTE FUNCTION orchestrator.wake_routers();

-- A captured statement's events wait here until its transaction commits, then take their ids under the session's
-- lock (`orchestrator_captured_take`, run by the deferred trigger below at the commit's start). The lock used to be
-- taken by the statement and held to the commit, so writers of one session queued behind each other's whole
-- transactions, the application's round trips included; now they queue behind each other's commits only. Ids are
-- still drawn and made visible in commit order. Unlogged and never committed with rows in it: each row goes in the
-- transaction that put it there, so a crash leaves nothing to lose (and the column is not `session_id`, so a
-- session's purge does not look here).
CREATE UNLOGGED TABLE orchestrator.captured_pending (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    for_session text NOT NULL,
    events     jsonb NOT NULL
);
-- A statement of 10,000 rows is one value here: kept as it is, not compressed and read back.
ALTER TABLE orchestrator.captured_pending ALTER COLUMN events SET STORAGE EXTERNAL;

CREATE FUNCTION orchestrator.orchestrator_captured_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM orchestrator.orchestrator_captured_take(NEW.id);
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER captured_pending_commit AFTER INSERT ON orchestrator.captured_pending
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION orchestrator.orchestrator_captured_commit();
