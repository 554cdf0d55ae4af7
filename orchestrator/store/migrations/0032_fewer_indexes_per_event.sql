-- What a routed event costs in indexes (docs/scaling.md, "Half a plain queue's CPU"): a queue row is written
-- when the router queues an event into a lane and deleted when a batch takes it, so each of its indexes is paid
-- for twice an event and lane (the entry, then vacuum's cleanup). `lane_events_event` found the lanes an event
-- was queued in by the event alone; its one reader, a trim, now probes by the session's lanes (the primary key,
-- `(lane_id, event_id)`), which `explain_event` already did.
DROP INDEX orchestrator.lane_events_event;

-- The events a round reads again for their spans are the traced ones only: found by a partial index (empty when
-- nothing is traced, and written only for a traced event) instead of a second read of the whole page.
CREATE INDEX events_traced ON orchestrator.events (session_id, id) WHERE traceparent IS NOT NULL;
