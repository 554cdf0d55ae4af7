-- A lane's queue as ranges of its session's event ids, not a row an event. A range [first_id, last_id] holds
-- every event of the lane's session whose id is in it: the round that queues a page writes one range for each
-- run of the page's events that go to a lane one after another (most pages: one range a lane), where it wrote a
-- row for each event, and a batch's finish deletes or shortens a range where it deleted a row for each event it
-- took. Ids are in commit order within a session (its row's lock), so no event can come later into a range. A
-- range's `last_id` is always an event of its lane (a range that would hold none is not kept); its `first_id`
-- may be an id past a batch that took the range's head. Measured on the bulk case (`bench.vs_pgqueuer`), where a
-- page of 1,000 events into one serial lane wrote and deleted 1,000 rows and their two indexes' entries.
CREATE TABLE orchestrator.lane_queue (
    lane_id   bigint NOT NULL,
    first_id  bigint NOT NULL,
    last_id   bigint NOT NULL,
    -- The listener version the range's events were routed by (a page's run of events is split where it changes).
    version   integer,
    queued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (lane_id, first_id),
    CHECK (first_id <= last_id)
);

INSERT INTO orchestrator.lane_queue (lane_id, first_id, last_id, version, queued_at)
    SELECT lane_id, event_id, event_id, version, queued_at FROM orchestrator.lane_events;
DROP TABLE orchestrator.lane_events;

-- The queue an event a row, for reading (views, `explain_event`, retention's checks, tests): what the table was.
CREATE VIEW orchestrator.lane_events AS
    SELECT q.lane_id, e.id AS event_id, q.version, q.queued_at
    FROM orchestrator.lane_queue q
    JOIN orchestrator.lanes l ON l.id = q.lane_id
    JOIN orchestrator.events e ON e.session_id = l.session_id AND e.id >= q.first_id AND e.id <= q.last_id;
