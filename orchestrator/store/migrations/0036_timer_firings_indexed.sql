-- What the firings of a timer a run set wrote, found by that run (`cause.schedule.set_by`), as what a run wrote
-- is found by `events_caused_by_run`: `explain_event` follows a run forward to its timers' firings without reading
-- the session's whole stream. Only firings of a run's timers are in it.
CREATE INDEX events_caused_by_timer ON orchestrator.events (session_id, (cause -> 'schedule' ->> 'set_by'))
    WHERE cause -> 'schedule' ? 'set_by';
