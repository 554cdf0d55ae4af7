-- A wait's answer recorded, once, whoever finds it first (a routing round, the wait's own look back): the winning
-- condition and the events it takes, and the wait's probes gone. An event a wait of a run takes is that run's: it
-- leaves the queues of the run's listener's lanes that have not fired it yet (the round that answers leaves it
-- out of them before it queues; the look back finds it queued already). A lane left with nothing after what it
-- fired is as fired through everything routed to it; its `seq` moves either way, so a step decided over a
-- snapshot that held the event is refused as stale and reads again. A round's answer takes events it has not queued
-- yet (`p_queued` false: nothing to clean). Answers whether this call recorded it.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_wait_answered(
    p_wait bigint, p_matched integer, p_event_ids bigint[], p_told boolean, p_queued boolean
) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    w orchestrator.run_waits%ROWTYPE;
    v_lane record;
BEGIN
    UPDATE orchestrator.run_waits SET state = 'answered', matched = p_matched, event_ids = p_event_ids,
                                      ended_at = clock_timestamp(),
                                      told_at = CASE WHEN p_told THEN clock_timestamp() END
        WHERE id = p_wait AND state = 'open' RETURNING * INTO w;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM orchestrator.wait_probes WHERE wait_id = p_wait;
    IF p_queued AND w.kind = 'wait' AND w.listener IS NOT NULL THEN
        FOR v_lane IN
            SELECT l.id, l.fired_through FROM orchestrator.lanes l
            WHERE l.session_id = w.session_id AND l.listener = w.listener
              AND EXISTS (SELECT 1 FROM orchestrator.lane_queue q, unnest(p_event_ids) x(id)
                          WHERE q.lane_id = l.id AND x.id >= q.first_id AND x.id <= q.last_id
                            AND x.id > l.fired_through)
            ORDER BY l.lane COLLATE "C"
            FOR UPDATE
        LOOP
            PERFORM orchestrator.orchestrator_lane_unqueue(v_lane.id, w.session_id, x.id)
                FROM unnest(p_event_ids) x(id) WHERE x.id > v_lane.fired_through ORDER BY x.id;
            UPDATE orchestrator.lanes l
                SET seq = l.seq + 1,
                    fired_through = CASE WHEN EXISTS (SELECT 1 FROM orchestrator.lane_queue q
                                                      WHERE q.lane_id = l.id AND q.last_id > l.fired_through)
                                         THEN l.fired_through ELSE greatest(l.fired_through, l.routed_through) END
                WHERE l.id = v_lane.id;
        END LOOP;
    END IF;
    RETURN true;
END
$$;
