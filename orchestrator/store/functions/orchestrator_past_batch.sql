-- A batch the lane took before, with its entries (by reference) and the run it started (or repeats).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_past_batch(b orchestrator.batches)
RETURNS json LANGUAGE sql STABLE AS $$
    SELECT json_build_object(
        'batch', orchestrator.orchestrator_batch_json(b),
        'entries', (SELECT coalesce(json_agg(orchestrator.orchestrator_queued(e, NULL::orchestrator.listener_rules,
            NULL, NULL, NULL) ORDER BY e.id),
                                    '[]'::json)
                    FROM orchestrator.events e WHERE e.id = ANY (b.entry_ids)),
        'run', (SELECT orchestrator.orchestrator_run_json(r) FROM orchestrator.lane_runs r WHERE r.run_key = b.run_key))
$$;
