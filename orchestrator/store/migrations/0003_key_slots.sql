-- Keyed listeners: at most max_parallel keys of one listener run at once in a session. A row per lane that
-- holds a slot or waits for one; the lane that frees a slot hands it to the longest waiter in the same
-- transaction, so a slot is never free while a lane waits for it.
CREATE TABLE key_slots (
    session_id       text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    listener         text NOT NULL,
    lane             text NOT NULL,
    lane_workflow_id text NOT NULL,
    holding          boolean NOT NULL,
    since            timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (session_id, listener, lane)
);
CREATE INDEX key_slots_waiting ON key_slots (session_id, listener, since) WHERE NOT holding;
