-- A session's new events, told to the router (and the streams) listening on its shard's channel
-- (`orchestrator_wake_channel`): raised by the trigger `sessions_wake` (0029_wakeups_coalesced.sql) only when the
-- routers were not told since they last caught up with the session, or were told more than a second ago; the
-- time it was told goes on the row. A transaction that notifies takes PostgreSQL's lock for notifying commits,
-- which serializes every such commit on the server.
CREATE OR REPLACE FUNCTION orchestrator.wake_routers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.woken_at := clock_timestamp();
    PERFORM pg_notify(orchestrator.orchestrator_wake_channel(NEW.id), NEW.id);
    RETURN NEW;
END
$$;
