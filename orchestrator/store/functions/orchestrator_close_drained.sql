-- Close a draining session (one, or all: null) once its pending has all fired and its runs have ended: routed
-- past the drain point, no lane with an event at or before it unfired, no batch of it unfinished, no run of
-- such a batch holding a slot. Answers the sessions closed.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_close_drained(p_session text) RETURNS SETOF text LANGUAGE sql AS $$
    UPDATE orchestrator.sessions s SET status = 'closed', closed_at = clock_timestamp(), drain_through = NULL
    WHERE s.drain_through IS NOT NULL AND s.status = 'open' AND (p_session IS NULL OR s.id = p_session)
      AND (SELECT c.routed_event_id FROM orchestrator.routing_cursors c WHERE c.session_id = s.id) >= s.drain_through
      AND NOT EXISTS (SELECT 1 FROM orchestrator.lanes l JOIN orchestrator.lane_queue q ON q.lane_id = l.id
                      WHERE l.session_id = s.id AND q.first_id <= s.drain_through AND q.last_id > l.fired_through
                        AND EXISTS (SELECT 1 FROM orchestrator.events e WHERE e.session_id = s.id
                                    AND e.id >= greatest(q.first_id, l.fired_through + 1)
                                    AND e.id <= least(q.last_id, s.drain_through)))
      AND NOT EXISTS (SELECT 1 FROM orchestrator.lanes l JOIN orchestrator.batches b ON b.lane_id = l.id
                      WHERE l.session_id = s.id AND b.first_id <= s.drain_through AND b.state = 'claimed')
      AND NOT EXISTS (SELECT 1 FROM orchestrator.lanes l JOIN orchestrator.lane_runs r ON r.lane_id = l.id
          JOIN orchestrator.batches b ON b.id = r.batch_id
                      WHERE l.session_id = s.id AND b.first_id <= s.drain_through)
    RETURNING s.id
$$;
