-- Whether a run's wait (or its cancel watch) may hear an event for who wrote it: never its own run's writes, nor
-- what its listener writes with no run (its batches' receipts, its `listener.failed`; its lanes' `lane.idle` is
-- news to it as to the lane), and a cancel watch nothing its listener wrote (a listener's runs never cancel each
-- other: never woken by itself). A null is no: an event of no listener, a run of none, are never the listener's
-- own. What the event says is `orchestrator_condition_takes`'. Without a sub-select, so the planner writes it into
-- the look back (`orchestrator_wait_open`) and the routing round (`orchestrator_answer_waits`) that ask.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_wait_hears_from(e orchestrator.events, w orchestrator.run_waits)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT (e.source ->> 'execution') IS DISTINCT FROM w.execution_id
       AND NOT coalesce(w.listener IS NOT NULL AND (e.source ->> 'listener') = w.listener
                        AND NOT (e.source ? 'execution') AND e.type <> 'lane.idle', false)
       AND (w.kind <> 'cancel' OR (e.source ->> 'listener') IS DISTINCT FROM w.listener)
$$;
