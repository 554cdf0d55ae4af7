-- Flow control: a listener paused (in one session, or in all: `session_id` null) keeps routing but fires
-- nothing; its events wait in its lanes until it is resumed.
CREATE TABLE listener_pauses (
    name       text NOT NULL,
    session_id text REFERENCES sessions (id) ON DELETE CASCADE,
    paused_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE UNIQUE INDEX listener_pauses_key ON listener_pauses (name, coalesce(session_id, ''));

-- Batches asked for again: `replay_batch` (a past batch's events, `replay_of` its first id) and `redeliver`
-- (a range of events, chunked by the listener's max_events). A lane's fire takes them, one at a time when a
-- slot is free, as batches of their own (`batches.replay`).
CREATE TABLE replays (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lane_id      bigint NOT NULL REFERENCES lanes (id) ON DELETE CASCADE,
    event_ids    bigint[] NOT NULL,
    replay_of    bigint,
    requested_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX replays_lane ON replays (lane_id, id);
