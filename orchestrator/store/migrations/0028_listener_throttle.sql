-- A listener's own throttle (`throttle: {per_seconds, runs, key?}`, core/throttles.py): at most `runs` of its
-- batches act per `per_seconds`, per the value at `key` (else per listener), in each session; a batch beyond it
-- waits in its lane, unlike one past the deployment's `listener_fires_per_minute`, which is consumed as
-- `throttled`.
--
-- Each key keeps the times of its newest `runs` starts, oldest first, in one row (`throttle_keys`): a key lets
-- the next batch go while it has fewer, or once the oldest of them is `per_seconds` old. One row a key, read by
-- its primary key and rewritten at each start under the listener's fires lock (the record's), where one row per
-- start would need an index scan of `runs` rows for each key a snapshot asks about; `runs` is at most 1,000, so a
-- row is at most 8 KB. The newest `runs` alone decide, so a re-save that changes either number stays exact
-- (a lowered `runs` is cut at the next start). Rows go with their session (its purge takes every table with a
-- `session_id`); a key that stopped firing keeps its small row until then, as a lane does.
CREATE TABLE orchestrator.throttle_keys (
    session_id text NOT NULL,
    listener   text NOT NULL,
    key        text NOT NULL,
    starts     timestamptz[] NOT NULL,
    PRIMARY KEY (session_id, listener, key)
);

-- A listener version's throttle, compiled at its save as its lane key is (`core/rules.compile_rule`): the snapshot
-- reads each waiting event's key and each key's limit from it. Null `throttle_runs`: no throttle; null
-- `throttle_root` with runs: one key for the listener. Versions saved before have none, as their bodies say.
ALTER TABLE orchestrator.listener_rules
    ADD COLUMN throttle_runs integer,
    ADD COLUMN throttle_seconds double precision,
    ADD COLUMN throttle_root text,
    ADD COLUMN throttle_rest text[] NOT NULL DEFAULT '{}';

-- The keys a batch was counted under: its repeat counts under them again, and `explain_event` can say which.
ALTER TABLE orchestrator.batches ADD COLUMN throttle_keys text[] NOT NULL DEFAULT '{}';

-- When a step that found the throttle holding the lane said it would step again (`LaneStore.hold`), cleared by the
-- lane's next record: what status shows, and what keeps the router's poll from nudging a lane its own clock will
-- wake (its events wait past their window by design). The step itself never reads it.
ALTER TABLE orchestrator.lanes ADD COLUMN throttled_until timestamptz;
