-- The queue the lane's own batch consumed (not a repeat's or a replay's), once: everything queued up to its last
-- event gone (the ranges that end there deleted, the one that runs past it shortened: 0032_lane_queue_ranges.sql),
-- and when each of its events was queued kept in the batch (`queued_at`, in the order of `event_ids`) for
-- `explain_event`: each event's is its range's, the range that starts last at or before it (ranges do not
-- overlap), found in one ordered pass over the ranges' starts and the events rather than a range per event.
--
-- The lane's row is held first (FOR KEY SHARE, after the caller's session, keys and execution locks, as 0002's
-- order has it): a wait that takes one of the lane's events (`orchestrator_wait_answered`, which holds the row FOR
-- UPDATE) splits the range this may cut, and the two must not act on one range at once. The statement after it
-- reads the ranges as they are once the other has committed.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_batch_take_queue(p_batch bigint) RETURNS void LANGUAGE sql AS $$
    SELECT NULL FROM orchestrator.lanes l JOIN orchestrator.batches b ON b.lane_id = l.id
    WHERE b.id = p_batch AND b.retry = 0 AND b.replay = 0 AND b.queued_at IS NULL
    FOR KEY SHARE OF l;
    WITH b AS (
        SELECT id, lane_id, last_id, event_ids FROM orchestrator.batches
        WHERE id = p_batch AND retry = 0 AND replay = 0 AND queued_at IS NULL),
    gone AS (
        DELETE FROM orchestrator.lane_queue q USING b
        WHERE q.lane_id = b.lane_id AND q.first_id <= b.last_id AND q.last_id <= b.last_id
        RETURNING q.first_id, q.queued_at),
    cut AS (
        -- `o` is the row as it was: its start, before this moves it past the batch.
        UPDATE orchestrator.lane_queue q SET first_id = b.last_id + 1
        FROM b, orchestrator.lane_queue o
        WHERE q.lane_id = b.lane_id AND q.first_id <= b.last_id AND q.last_id > b.last_id
          AND o.lane_id = q.lane_id AND o.first_id = q.first_id
        RETURNING o.first_id, q.queued_at),
    marks AS (
        SELECT u.n, u.queued_at, count(u.queued_at) OVER (ORDER BY u.at, u.n NULLS FIRST) AS range_no
        FROM (SELECT s.first_id AS at, NULL::bigint AS n, s.queued_at FROM (TABLE gone UNION ALL TABLE cut) s
              UNION ALL
              SELECT x.id, x.n, NULL FROM b, unnest(b.event_ids) WITH ORDINALITY AS x(id, n)) u),
    taken AS (
        SELECT m.n, first_value(m.queued_at) OVER (PARTITION BY m.range_no ORDER BY m.n NULLS FIRST) AS queued_at
        FROM marks m)
    UPDATE orchestrator.batches t
    SET queued_at = (SELECT array_agg(k.queued_at ORDER BY k.n) FROM taken k WHERE k.n IS NOT NULL)
    FROM b WHERE t.id = b.id
$$;
