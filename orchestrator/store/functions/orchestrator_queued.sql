-- A waiting event as `lane_snapshot.Queued`: its id, commit, depth, size, `distinct_by` value, whether the
-- listener as declared now takes it, its traceparent, and its pointer's parts as columns (type, alias, item id,
-- execution id, nodes), which the store's reader puts together (`lanes_pg.queued_of`): a lane's read of 1,000
-- waiting events, 6.5 -> 2.7 ms against a JSON object built per event (0017_fewer_calls_per_event.sql). `r` is
-- the listener version in effect now (null: deleted); `p_version` the version the event was routed by (null: not
-- known, so asked again), `p_listener`/`p_lane` the lane, whose own silence it always takes.
--
-- Its size is what it weighs in its batch (which stops before 512 KiB, as its run's input would): the row, a
-- thread item's whole message, which its run's `batch.events` carries where the row keeps a preview, and data
-- PostgreSQL keeps compressed by its text (200 KB of one letter is a row of 2.4 KB). Where PostgreSQL does not
-- inline this function it hands `e.data` decompressed while `e.*` is the row as kept, so a value of over 2,000
-- bytes as read counts too (a row over about 2 KB is compressed or moved out before it is kept; one moved out
-- whole, data that does not compress, then weighs twice: a batch stops early, never past its budget).
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
                   THEN orchestrator.orchestrator_item_bytes(e.session_id, e.alias, e.item ->> 'id')
                   WHEN pg_column_compression(e.data) IS NOT NULL OR pg_column_size(e.data) > 2000
                   THEN octet_length(e.data::text) ELSE 0 END,
        CASE WHEN r.distinct_root IS NOT NULL
             THEN orchestrator.orchestrator_canonical(orchestrator.orchestrator_value(e, r.distinct_root,
                 r.distinct_rest)) END,
        coalesce(r.name IS NULL OR p_version = r.version
                 OR (e.type = 'lane.idle' AND e.data ->> 'listener' = p_listener AND e.data ->> 'lane' = p_lane)
                 OR orchestrator.orchestrator_takes(e, r), false),
        e.traceparent, e.type, e.alias, e.item ->> 'id', e.execution ->> 'id',
        CASE WHEN jsonb_typeof(e.graph -> 'nodes') = 'array' THEN e.graph -> 'nodes' END)
$$;
