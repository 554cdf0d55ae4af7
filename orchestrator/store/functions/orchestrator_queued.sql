-- A waiting event as `lane_snapshot.Queued`: its id, commit, depth, size, `distinct_by` value, whether the
-- listener as declared now takes it, its traceparent, and its pointer's parts as columns (type, alias, item id,
-- execution id, nodes), which the store's reader puts together (`lanes_pg.queued_of`): a lane's read of 1,000
-- waiting events, 6.5 -> 2.7 ms against a JSON object built per event (0017_fewer_calls_per_event.sql). `r` is
-- the listener version in effect now (null: deleted); `p_version` the version the event was routed by (null: not
-- known, so asked again), `p_listener`/`p_lane` the lane, whose own silence it always takes.
--
-- Its size is what it weighs in its batch (which stops before 512 KiB, as its run's input would): the row, and a
-- thread item's whole message, which its run's `batch.events` carries where the row keeps a preview.
--
-- Inlined by PostgreSQL into the statement that reads the lane (no sub-select here: `orchestrator_item_bytes`),
-- some 3 to 4 us a waiting event; not inlined, it cost some 25.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_queued(e orchestrator.events, r orchestrator.listener_rules,
    p_version integer, p_listener text, p_lane text)
RETURNS json LANGUAGE sql STABLE AS $$
    SELECT json_build_array(
        e.id, extract(epoch FROM e.created_at), e.depth,
        pg_column_size(e.*)
            + CASE WHEN e.type = 'thread.item_posted'
                   THEN orchestrator.orchestrator_item_bytes(e.session_id, e.alias, e.item ->> 'id') ELSE 0 END,
        CASE WHEN r.distinct_root IS NOT NULL
             THEN orchestrator.orchestrator_canonical(orchestrator.orchestrator_value(e, r.distinct_root,
                 r.distinct_rest)) END,
        coalesce(r.name IS NULL OR p_version = r.version
                 OR (e.type = 'lane.idle' AND e.data ->> 'listener' = p_listener AND e.data ->> 'lane' = p_lane)
                 OR orchestrator.orchestrator_takes(e, r), false),
        e.traceparent, e.type, e.alias, e.item ->> 'id', e.execution ->> 'id',
        CASE WHEN jsonb_typeof(e.graph -> 'nodes') = 'array' THEN e.graph -> 'nodes' END)
$$;
