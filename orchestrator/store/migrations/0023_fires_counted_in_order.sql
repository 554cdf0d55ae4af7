-- The throttle without a scan of the minute (issue: "no throttle scan per fire"). Each counted batch of a
-- (session, listener) carries its place among them, `fire_seq` (1, 2, ...), given at its record under the
-- listener's fires lock, where `created_at` is read too: both grow together. The fires of the last minute are
-- then the newest's place less the place of the oldest within the minute, plus one: two probes of
-- `batches_fires`, where the count read every counted batch of the minute, three times a batch (the record's
-- throttle, and the snapshot read at a batch's finish and at its run's end); 1,140 rows a count for a keyed
-- listener firing 19 times a second. Retention keeps the last minute's batches (0003_retention.sql), so no
-- place inside the minute is missing. Rows written before get their places here, in the order of their
-- commit times. 0002's `orchestrator_lane_record` and 0008's `orchestrator_lane_snapshot` are restated with
-- the count taken from `orchestrator_fires_lately`, otherwise as they were. A counted batch's `created_at` is
-- never before the listener's last fire's, so a wall clock stepped back cannot order two places against their
-- times: the fires of such a step count as fires of that last moment until the clock catches up.
ALTER TABLE batches ADD COLUMN fire_seq bigint;
UPDATE batches b SET fire_seq = x.n
    FROM (SELECT id, row_number() OVER (PARTITION BY session_id, listener ORDER BY created_at, id) AS n
          FROM batches WHERE counted) x
    WHERE b.id = x.id;

-- How often a listener fired in a session in the minute before `p_now`, and when the oldest of those fires was
-- (no row: none). The newest fire is inside the minute whenever the oldest is.
CREATE FUNCTION orchestrator_fires_lately(p_session text, p_listener text, p_now timestamptz)
RETURNS TABLE (fires bigint, oldest timestamptz) LANGUAGE sql STABLE AS $$
    SELECT n.fire_seq - f.fire_seq + 1, f.created_at
    FROM (SELECT b.fire_seq, b.created_at FROM batches b
          WHERE b.session_id = p_session AND b.listener = p_listener AND b.counted
            AND b.created_at > p_now - interval '60 seconds'
          ORDER BY b.created_at LIMIT 1) f
    CROSS JOIN (SELECT b.fire_seq FROM batches b
                WHERE b.session_id = p_session AND b.listener = p_listener AND b.counted
                ORDER BY b.created_at DESC LIMIT 1) n
$$;

CREATE OR REPLACE FUNCTION orchestrator_lane_record(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
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
BEGIN
    PERFORM orchestrator_share_session(v_session);
    IF (b ->> 'counted')::boolean THEN
        PERFORM pg_advisory_xact_lock(hashtext('fires:' || v_session || ':' || v_listener));
        IF coalesce((SELECT f.fires FROM orchestrator_fires_lately(v_session, v_listener, clock_timestamp()) f), 0)
           >= (p ->> 'fires_limit')::integer THEN
            RETURN '{"stale": "throttle"}';
        END IF;
        SELECT fire_seq, created_at INTO v_fire, v_fire_at FROM batches
            WHERE session_id = v_session AND listener = v_listener AND counted ORDER BY created_at DESC LIMIT 1;
        v_fire := coalesce(v_fire, 0) + 1;
        -- Never before the last fire (a clock stepped back): places and times grow together.
        v_fire_at := greatest(clock_timestamp(), v_fire_at + interval '1 microsecond');
    END IF;
    IF v_key IN ('take', 'give_back') THEN
        PERFORM orchestrator_keys_lock(v_session, v_listener);
    END IF;
    IF v_key = 'take' AND NOT EXISTS (SELECT 1 FROM key_slots WHERE lane_id = v_lane AND holding)
       AND (SELECT count(*) FROM key_slots WHERE session_id = v_session AND listener = v_listener AND holding) >= v_max THEN
        RETURN '{"stale": "key_slot"}';
    END IF;
    IF EXISTS (SELECT 1 FROM listener_pauses WHERE name = v_listener AND (session_id IS NULL OR session_id = v_session)) THEN
        RETURN '{"stale": "paused"}';
    END IF;
    UPDATE lanes SET seq = seq + 1,
        fired_through = CASE WHEN p ->> 'kind' = 'batch' THEN greatest(fired_through, (b ->> 'last_id')::bigint)
                             ELSE fired_through END
        WHERE id = v_lane AND seq = (p ->> 'seq')::bigint;
    IF NOT FOUND THEN
        RETURN '{"stale": "seq"}';
    END IF;
    IF v_key = 'take' THEN
        INSERT INTO key_slots (lane_id, session_id, listener, holding) VALUES (v_lane, v_session, v_listener, true)
            ON CONFLICT (lane_id) DO UPDATE SET holding = true;
    END IF;
    INSERT INTO batches (lane_id, session_id, listener, first_id, last_id, event_ids, entry_ids, retry, replay,
                         replay_of, verdict, counted, run_key, fire_seq, created_at)
        VALUES (v_lane, v_session, v_listener, (b ->> 'first_id')::bigint, (b ->> 'last_id')::bigint,
                ARRAY(SELECT jsonb_array_elements_text(b -> 'event_ids')::bigint),
                ARRAY(SELECT jsonb_array_elements_text(b -> 'entry_ids')::bigint),
                (b ->> 'retry')::integer, (b ->> 'replay')::integer, (b ->> 'replay_of')::bigint,
                CASE WHEN jsonb_typeof(b -> 'verdict') = 'object' THEN b -> 'verdict' END,
                (b ->> 'counted')::boolean, b ->> 'run_key', v_fire, coalesce(v_fire_at, clock_timestamp()))
        RETURNING id INTO v_batch;
    IF p ->> 'kind' = 'replay' THEN
        DELETE FROM replays WHERE id = (p ->> 'replay_id')::bigint;
    END IF;
    IF jsonb_typeof(r) = 'object' THEN
        IF p ->> 'kind' = 'repeat' THEN
            UPDATE lane_runs SET execution_id = r ->> 'execution_id', retry = (r ->> 'retry')::integer, due_at = NULL
                WHERE run_key = r ->> 'run_key';
        ELSE
            INSERT INTO lane_runs (run_key, lane_id, batch_id, execution_id, retry, plan)
                VALUES (r ->> 'run_key', v_lane, v_batch, r ->> 'execution_id', 0, r -> 'plan');
        END IF;
        INSERT INTO executions (id, session_id, workflow, listener, lane, batch, run_key, depth, cause)
            VALUES (r ->> 'execution_id', v_session, r ->> 'workflow', v_listener, p ->> 'lane', r -> 'batch',
                    r ->> 'run_key', (r ->> 'depth')::integer, r -> 'cause')
            ON CONFLICT (id) DO NOTHING;
    ELSIF p ->> 'kind' = 'repeat' THEN
        -- A repeat stopped by a guard: the failed run's slot goes with it.
        WITH gone AS (DELETE FROM lane_runs WHERE run_key = b ->> 'run_key' RETURNING batch_id)
            UPDATE batches SET released_at = clock_timestamp() FROM gone WHERE batches.id = gone.batch_id;
    END IF;
    IF v_key = 'give_back' THEN
        v_granted := orchestrator_key_slot_freed(v_lane, v_session, v_listener, v_max,
            EXISTS (SELECT 1 FROM lanes WHERE id = v_lane AND routed_through > fired_through));
    END IF;
    RETURN jsonb_build_object('batch_id', v_batch, 'granted', v_granted);
END
$$;

CREATE OR REPLACE FUNCTION orchestrator_lane_snapshot(p_session text, p_listener text, p_lane text, p_fetch integer)
RETURNS json LANGUAGE plpgsql STABLE AS $$
DECLARE
    l lanes%ROWTYPE;
    r listener_rules%ROWTYPE;
    v_now timestamptz := clock_timestamp();
    v_listener jsonb;
    v_fetch integer := p_fetch;
BEGIN
    SELECT * INTO l FROM lanes WHERE session_id = p_session AND listener = p_listener AND lane = p_lane;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- The newest version in effect (one saved during the activation delay acts once it takes effect), or
    -- the newest saved when none is yet (its events cannot have been routed before it was).
    SELECT jsonb_build_object(
        'version', v.version, 'body', v.body,
        'switched_off', EXISTS (SELECT 1 FROM listener_switches w
                                WHERE w.session_id = p_session AND w.name = p_listener AND NOT w.enabled),
        'paused', EXISTS (SELECT 1 FROM listener_pauses p
                          WHERE p.name = p_listener AND (p.session_id IS NULL OR p.session_id = p_session)))
    INTO v_listener
    FROM listeners n JOIN listener_versions v ON v.name = n.name
    WHERE n.name = p_listener AND n.deleted_at IS NULL
    ORDER BY v.effective_at <= v_now DESC, v.version DESC LIMIT 1;
    IF v_listener IS NOT NULL THEN
        SELECT * INTO r FROM listener_rules WHERE name = p_listener AND version = (v_listener ->> 'version')::integer;
    END IF;
    -- Without `distinct_by` a batch takes at most `max_events` events: no more are read. A body keeps what was
    -- declared, so a default left out is the declaration's (`BatchSpec.max_events`, 100), as
    -- `lane_snapshot.fetch_limit` says.
    IF v_listener IS NOT NULL AND v_listener -> 'body' -> 'batch' ->> 'distinct_by' IS NULL THEN
        v_fetch := least(p_fetch, coalesce((v_listener -> 'body' -> 'batch' ->> 'max_events')::integer, 100));
    END IF;
    RETURN json_build_object(
        'lane', jsonb_build_object(
            'id', l.id, 'workflow_id', l.workflow_id, 'seq', l.seq, 'fired_through', l.fired_through,
            'routed_through', l.routed_through, 'newest_id', l.newest_id,
            'newest_at', extract(epoch FROM l.newest_at)),
        'now', extract(epoch FROM v_now),
        'session', (SELECT jsonb_build_object('status', s.status, 'alias', s.alias) FROM sessions s WHERE s.id = p_session),
        'listener', v_listener,
        'oldest_at', (SELECT extract(epoch FROM e.created_at) FROM lane_events q JOIN events e ON e.id = q.event_id
                      WHERE q.lane_id = l.id AND q.event_id > l.fired_through ORDER BY q.event_id LIMIT 1),
        'waiting', (
            SELECT coalesce(json_agg(orchestrator_queued(e, r, w.version, p_listener, p_lane) ORDER BY e.id), '[]'::json)
            FROM (SELECT q.event_id, q.version FROM lane_events q WHERE q.lane_id = l.id AND q.event_id > l.fired_through
                  ORDER BY q.event_id LIMIT v_fetch) w
            JOIN events e ON e.id = w.event_id),
        'runs', (SELECT coalesce(jsonb_agg(orchestrator_run_json(x) ORDER BY x.run_key), '[]')
                 FROM lane_runs x WHERE x.lane_id = l.id),
        'claimed', (SELECT orchestrator_past_batch(b) FROM batches b
                    WHERE b.lane_id = l.id AND b.state = 'claimed' ORDER BY b.id LIMIT 1),
        'repeat', (SELECT orchestrator_past_batch(b) FROM lane_runs x JOIN batches b ON b.id = x.batch_id
                   WHERE x.lane_id = l.id AND x.due_at IS NOT NULL ORDER BY x.due_at LIMIT 1),
        'replay', (
            SELECT json_build_object(
                'id', p.id, 'replay_of', p.replay_of,
                'events', CASE WHEN p_fetch > 0 THEN (
                    SELECT coalesce(json_agg(orchestrator_queued(e, r, NULL, p_listener, p_lane) ORDER BY e.id), '[]'::json)
                    FROM events e WHERE e.id = ANY (p.event_ids)) ELSE '[]'::json END,
                'number', 1 + (SELECT coalesce(max(b.replay), 0) FROM batches b
                               WHERE b.lane_id = l.id AND b.first_id = (SELECT min(x) FROM unnest(p.event_ids) x)))
            FROM replays p WHERE p.lane_id = l.id ORDER BY p.id LIMIT 1),
        'key_slot', (SELECT CASE WHEN k.holding THEN 'held' ELSE 'queued' END FROM key_slots k WHERE k.lane_id = l.id),
        'keys_held', (SELECT count(*) FROM key_slots k
                      WHERE k.session_id = p_session AND k.listener = p_listener AND k.holding),
        'fires', (SELECT jsonb_build_object('count', coalesce(max(f.fires), 0), 'oldest', extract(epoch FROM max(f.oldest)))
                  FROM orchestrator_fires_lately(p_session, p_listener, v_now) f),
        'running', (SELECT count(*) FROM executions x WHERE x.session_id = p_session AND x.status = 'running'));
END
$$;
