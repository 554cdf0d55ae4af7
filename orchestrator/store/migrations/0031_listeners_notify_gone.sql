-- A listener's save no longer notifies `orchestrator_listeners`: no process has listened on it since routers read
-- a listener version's declaration when a round first needs it, and every notifying commit takes PostgreSQL's
-- lock for notifying commits, one for the whole server (0029_wakeups_coalesced.sql).
DROP TRIGGER listeners_notify ON orchestrator.listeners;
DROP FUNCTION orchestrator.notify_listener();
