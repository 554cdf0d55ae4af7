-- A batch as the lane step reads it (`core/lane_snapshot`).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_batch_json(b orchestrator.batches)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', b.id, 'first_id', b.first_id, 'last_id', b.last_id, 'event_ids', to_jsonb(b.event_ids),
        'entry_ids', to_jsonb(b.entry_ids), 'retry', b.retry, 'replay', b.replay, 'replay_of', b.replay_of,
        'verdict', b.verdict, 'run_key', b.run_key, 'throttle_keys', to_jsonb(b.throttle_keys))
$$;
