-- A batch the lane took before, as `orchestrator_past_batch` answers it, with its entries judged by the listener as
-- declared now (`r`, its rules; null: none, so each is taken): what a failed run's repeat passes the guards with,
-- so a re-save that takes none of its events any more skips it (`unmatched`) as it would a new batch.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_past_batch_now(b orchestrator.batches,
    r orchestrator.listener_rules)
RETURNS json LANGUAGE sql STABLE AS $$
    SELECT json_build_object(
        'batch', orchestrator.orchestrator_batch_json(b),
        'entries', (SELECT coalesce(json_agg(orchestrator.orchestrator_queued(e, r, NULL, b.listener,
            (SELECT l.lane FROM orchestrator.lanes l WHERE l.id = b.lane_id)) ORDER BY e.id), '[]'::json)
                    FROM orchestrator.events e WHERE e.id = ANY (b.entry_ids)),
        'run', (SELECT orchestrator.orchestrator_run_json(x) FROM orchestrator.lane_runs x WHERE x.run_key = b.run_key))
$$;
