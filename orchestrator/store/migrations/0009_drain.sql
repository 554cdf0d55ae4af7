-- `close_session` with `drain: true`: the session stays open until what was pending when it was asked has
-- fired and the runs of those batches have ended; then it closes. `drain_through` is the session's last event
-- id at that moment (null: no drain asked).
ALTER TABLE sessions ADD COLUMN drain_through bigint;
CREATE INDEX sessions_draining ON sessions (id) WHERE drain_through IS NOT NULL AND status = 'open';
