-- The queue rows the lane's own batch consumed (not a repeat's or a replay's), once: gone, and when each was
-- queued kept in the batch (`queued_at`, in the order of `event_ids`) for `explain_event`.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_batch_take_queue(p_batch bigint) RETURNS void LANGUAGE sql AS $$
    WITH b AS (
        SELECT id, lane_id, last_id, event_ids FROM orchestrator.batches
        WHERE id = p_batch AND retry = 0 AND replay = 0 AND queued_at IS NULL),
    gone AS (
        DELETE FROM orchestrator.lane_events q USING b
        WHERE q.lane_id = b.lane_id AND q.event_id <= b.last_id
        RETURNING q.event_id, q.queued_at)
    UPDATE orchestrator.batches t
    SET queued_at = (SELECT array_agg(g.queued_at ORDER BY x.n)
                     FROM unnest(b.event_ids) WITH ORDINALITY AS x(id, n) LEFT JOIN gone g ON g.event_id = x.id)
    FROM b WHERE t.id = b.id
$$;
