-- The record of a step's `Take`: a batch, the run it starts and the slots it takes, over the snapshot it was
-- decided from. Answers `{"stale": why}` when the lane moved on (`seq`), the listener was paused, the throttle
-- or every key slot was taken meanwhile; else the batch's id and the lanes a key slot it gave back went to. A
-- counted batch takes its place among the listener's fires in the session (`fire_seq`) under the fires lock,
-- and the throttle counts the last minute's by `orchestrator_fires_lately` (0023_fires_counted_in_order.sql). A
-- counted batch of a listener with a throttle of its own (`throttle`: its runs, window and the batch's keys) is
-- refused as `listener_throttle` when one of its keys has started `runs` batches in the window meanwhile, and is
-- added
-- to each key's starts, of which the newest `runs` are kept (0028_listener_throttle.sql). Any record clears what a
-- step held by the throttle said (`throttled_until`). A record that starts a run (`run`) with `executions_limit`
-- counts the session's running executions again under the session's executions lock (`orchestrator_executions_lock`,
-- after the listener's locks, before any row: docs/decisions.md's "One lock order"), and answers stale as
-- `executions` when
-- the limit is reached: lanes of any listener recording runs at once cannot all pass the count their snapshots read
-- without a lock. The driver reads again, and the step's verdict refuses the batch (`refused`) by the count it reads.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_lane_record(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_lane bigint := (p ->> 'lane_id')::bigint;
    v_session text := p ->> 'session_id';
    v_listener text := p ->> 'listener';
    b jsonb := p -> 'batch';
    r jsonb := p -> 'run';
    v_key text := p ->> 'key_slot';
    v_max integer := coalesce((p ->> 'key_max')::integer, 0);
    v_batch bigint;
    v_granted jsonb := '[]';
    v_fire bigint;
    v_fire_at timestamptz;
    t jsonb := p -> 'throttle';
    v_runs integer := (p -> 'throttle' ->> 'runs')::integer;
    -- The listener's own throttle is judged and kept on the step's time when it leads the database's (a lane's
    -- own, on a server that skips time).
    v_at timestamptz := greatest(clock_timestamp(), to_timestamp((p ->> 'at')::double precision));
BEGIN
    PERFORM orchestrator.orchestrator_share_session(v_session);
    IF (b ->> 'counted')::boolean THEN
        PERFORM pg_advisory_xact_lock(hashtext('fires:' || v_session || ':' || v_listener));
        IF coalesce((SELECT f.fires FROM orchestrator.orchestrator_fires_lately(v_session, v_listener,
            clock_timestamp()) f), 0)
           >= (p ->> 'fires_limit')::integer THEN
            RETURN '{"stale": "throttle"}';
        END IF;
        IF jsonb_typeof(t) = 'object' AND EXISTS (SELECT 1 FROM orchestrator.throttle_keys k
            WHERE k.session_id = v_session AND k.listener = v_listener
              AND k.key IN (SELECT jsonb_array_elements_text(t -> 'keys')) AND cardinality(k.starts) >= v_runs
              AND k.starts[cardinality(k.starts) - v_runs + 1]
                  > v_at - make_interval(secs => (t ->> 'per_seconds')::double precision)) THEN
            RETURN '{"stale": "listener_throttle"}';
        END IF;
        SELECT fire_seq, created_at INTO v_fire, v_fire_at FROM orchestrator.batches
            WHERE session_id = v_session AND listener = v_listener AND counted ORDER BY created_at DESC LIMIT 1;
        v_fire := coalesce(v_fire, 0) + 1;
        -- Never before the last fire (a clock stepped back): places and times grow together.
        v_fire_at := greatest(clock_timestamp(), v_fire_at + interval '1 microsecond');
    END IF;
    IF v_key IN ('take', 'give_back') THEN
        PERFORM orchestrator.orchestrator_keys_lock(v_session, v_listener);
    END IF;
    IF v_key = 'take' AND NOT EXISTS (SELECT 1 FROM orchestrator.key_slots WHERE lane_id = v_lane AND holding)
       AND (SELECT count(*) FROM orchestrator.key_slots WHERE session_id = v_session AND listener = v_listener
           AND holding) >= v_max THEN
        RETURN '{"stale": "key_slot"}';
    END IF;
    IF EXISTS (SELECT 1 FROM orchestrator.listener_pauses WHERE name = v_listener AND (session_id IS NULL
        OR session_id = v_session)) THEN
        RETURN '{"stale": "paused"}';
    END IF;
    IF jsonb_typeof(r) = 'object' AND p ->> 'executions_limit' IS NOT NULL THEN
        -- Held to the commit, so the next recorder of a run in the session counts this one.
        PERFORM orchestrator.orchestrator_executions_lock(v_session);
        IF orchestrator.orchestrator_running_executions(v_session) >= (p ->> 'executions_limit')::integer THEN
            RETURN '{"stale": "executions"}';
        END IF;
    END IF;
    UPDATE orchestrator.lanes SET seq = seq + 1, throttled_until = NULL,
        fired_through = CASE WHEN p ->> 'kind' = 'batch' THEN greatest(fired_through, (b ->> 'last_id')::bigint)
                             ELSE fired_through END
        WHERE id = v_lane AND seq = (p ->> 'seq')::bigint;
    IF NOT FOUND THEN
        RETURN '{"stale": "seq"}';
    END IF;
    IF v_key = 'take' THEN
        INSERT INTO orchestrator.key_slots (lane_id, session_id, listener, holding) VALUES (v_lane, v_session,
            v_listener, true)
            ON CONFLICT (lane_id) DO UPDATE SET holding = true;
    END IF;
    INSERT INTO orchestrator.batches (lane_id, session_id, listener, first_id, last_id, event_ids, entry_ids, retry,
        replay,
                         replay_of, verdict, counted, run_key, fire_seq, created_at, throttle_keys)
        VALUES (v_lane, v_session, v_listener, (b ->> 'first_id')::bigint, (b ->> 'last_id')::bigint,
                ARRAY(SELECT jsonb_array_elements_text(b -> 'event_ids')::bigint),
                ARRAY(SELECT jsonb_array_elements_text(b -> 'entry_ids')::bigint),
                (b ->> 'retry')::integer, (b ->> 'replay')::integer, (b ->> 'replay_of')::bigint,
                CASE WHEN jsonb_typeof(b -> 'verdict') = 'object' THEN b -> 'verdict' END,
                (b ->> 'counted')::boolean, b ->> 'run_key', v_fire, coalesce(v_fire_at, clock_timestamp()),
                CASE WHEN jsonb_typeof(t) = 'object' THEN ARRAY(SELECT jsonb_array_elements_text(t -> 'keys'))
                     ELSE '{}'::text[] END)
        RETURNING id INTO v_batch;
    IF (b ->> 'counted')::boolean AND jsonb_typeof(t) = 'object' THEN
        INSERT INTO orchestrator.throttle_keys AS k (session_id, listener, key, starts)
            SELECT v_session, v_listener, x, ARRAY[greatest(v_fire_at, v_at)]
            FROM jsonb_array_elements_text(t -> 'keys') x
            ON CONFLICT (session_id, listener, key) DO UPDATE
                SET starts = (k.starts || EXCLUDED.starts)[greatest(cardinality(k.starts) + 2 - v_runs, 1):];
    END IF;
    IF p ->> 'kind' = 'replay' THEN
        DELETE FROM orchestrator.replays WHERE id = (p ->> 'replay_id')::bigint;
    END IF;
    IF jsonb_typeof(r) = 'object' THEN
        IF p ->> 'kind' = 'repeat' THEN
            UPDATE orchestrator.lane_runs SET execution_id = r ->> 'execution_id', retry = (r ->> 'retry')::integer,
                due_at = NULL
                WHERE run_key = r ->> 'run_key';
        ELSE
            INSERT INTO orchestrator.lane_runs (run_key, lane_id, batch_id, execution_id, retry, plan)
                VALUES (r ->> 'run_key', v_lane, v_batch, r ->> 'execution_id', 0, r -> 'plan');
        END IF;
        INSERT INTO orchestrator.executions (id, session_id, workflow, listener, lane, batch, run_key, depth, cause)
            VALUES (r ->> 'execution_id', v_session, r ->> 'workflow', v_listener, p ->> 'lane', r -> 'batch',
                    r ->> 'run_key', (r ->> 'depth')::integer, r -> 'cause')
            ON CONFLICT (id) DO NOTHING;
    ELSIF p ->> 'kind' = 'repeat' THEN
        -- A repeat stopped by a guard: the failed run's slot goes with it.
        WITH gone AS (DELETE FROM orchestrator.lane_runs WHERE run_key = b ->> 'run_key' RETURNING batch_id)
            UPDATE orchestrator.batches SET released_at = clock_timestamp() FROM gone WHERE batches.id = gone.batch_id;
    END IF;
    IF v_key = 'give_back' THEN
        v_granted := orchestrator.orchestrator_key_slot_freed(v_lane, v_session, v_listener, v_max,
            EXISTS (SELECT 1 FROM orchestrator.lanes WHERE id = v_lane AND routed_through > fired_through));
    END IF;
    RETURN jsonb_build_object('batch_id', v_batch, 'granted', v_granted);
END
$$;
