-- Flow control: a listener paused (in one session, or in all: `session_id` null) keeps routing but fires
-- nothing; its events wait in its lanes until it is resumed.
CREATE TABLE listener_pauses (
    name       text NOT NULL,
    session_id text REFERENCES sessions (id) ON DELETE CASCADE,
    paused_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE UNIQUE INDEX listener_pauses_key ON listener_pauses (name, coalesce(session_id, ''));
