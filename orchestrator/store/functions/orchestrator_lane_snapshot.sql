-- The lane step's snapshot of a lane (`orchestrator.core.lane_snapshot.LaneSnapshot`), read without a lock:
-- the record of a decision checks it over `seq`. Null for a lane the router never queued for. Waiting events and
-- a replay's are read by reference, as compact rows under the listener version in effect now
-- (`orchestrator_queued`, 0008_by_reference.sql); `p_fetch` 0 reads none of them: enough to know whether the
-- lane waits, and for what. The fires of the last minute come from `orchestrator_fires_lately`. The listener as
-- declared now is the newest version in effect of its current life (those that still have their rules); none in
-- effect reads as deleted: a listener saved again after its deletion routes nothing before its new version takes
-- effect, so what its lanes hold then is the deleted life's, consumed with no run, never judged by the new body. The listener's throttle (0028_listener_throttle.sql): the key of the
-- lane's oldest waiting event, when each key among the events read (that one, the waiting ones read, a repeat's
-- batch's, a replay's) that has started `runs` batches lets the next go (`core/throttles.free_at`), and for a
-- throttle by a path, the key of each waiting event read and of each of a replay's, in their order (the store's
-- reader puts them in the events: `lanes_pg.snapshot_of`). They are read apart from the events' rows
-- (`orchestrator_queued`), so a listener without a throttle by a path reads nothing more: a column of its own
-- there cost every read of 1,000 events 0.4 ms (2.55 to 2.95), throttle or none.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_lane_snapshot(p_session text, p_listener text, p_lane text,
    p_fetch integer)
RETURNS json LANGUAGE plpgsql STABLE AS $$
DECLARE
    l orchestrator.lanes%ROWTYPE;
    r orchestrator.listener_rules%ROWTYPE;
    v_now timestamptz := clock_timestamp();
    v_listener jsonb;
    v_fetch integer := p_fetch;
    v_repeat json;
    v_head text;
    -- The oldest event waiting (null fields: none): its commit, and its throttle key.
    v_oldest orchestrator.events;
    v_waiting_keys text[];
    v_replay_keys text[];
    v_keys text[];
    v_throttle json;
BEGIN
    SELECT * INTO l FROM orchestrator.lanes WHERE session_id = p_session AND listener = p_listener AND lane = p_lane;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- The newest version in effect (one saved during the activation delay acts once it takes effect).
    SELECT jsonb_build_object(
        'version', v.version, 'body', v.body,
        'switched_off', EXISTS (SELECT 1 FROM orchestrator.listener_switches w
                                WHERE w.session_id = p_session AND w.name = p_listener AND NOT w.enabled),
        'paused', EXISTS (SELECT 1 FROM orchestrator.listener_pauses p
                          WHERE p.name = p_listener AND (p.session_id IS NULL OR p.session_id = p_session)))
    INTO v_listener
    FROM orchestrator.listeners n
    -- Of the listener's current life: a deletion took its versions' rules (0025). Chosen among the rules' narrow
    -- rows, then joined to its body: a join of every version to its rule took a snapshot of a listener saved 200
    -- times from 0.65 to 1.7 ms; this way, 0.4.
    CROSS JOIN LATERAL (SELECT lr.version FROM orchestrator.listener_rules lr
                        WHERE lr.name = n.name AND lr.effective_at <= v_now ORDER BY lr.version DESC LIMIT 1) c
    JOIN orchestrator.listener_versions v ON v.name = n.name AND v.version = c.version
    WHERE n.name = p_listener AND n.deleted_at IS NULL;
    IF v_listener IS NOT NULL THEN
        SELECT * INTO r FROM orchestrator.listener_rules WHERE name = p_listener
            AND version = (v_listener ->> 'version')::integer;
    END IF;
    -- Without `distinct_by` a batch takes at most `max_events` events: no more are read. A body keeps what was
    -- declared, so a default left out is the declaration's (`BatchSpec.max_events`, 100), as
    -- `lane_snapshot.fetch_limit` says.
    IF v_listener IS NOT NULL AND v_listener -> 'body' -> 'batch' ->> 'distinct_by' IS NULL THEN
        v_fetch := least(p_fetch, coalesce((v_listener -> 'body' -> 'batch' ->> 'max_events')::integer, 100));
    END IF;
    v_repeat := (SELECT orchestrator.orchestrator_past_batch_now(b, r) FROM orchestrator.lane_runs x
        JOIN orchestrator.batches b ON b.id = x.batch_id
               WHERE x.lane_id = l.id AND x.due_at IS NOT NULL ORDER BY x.due_at LIMIT 1);
    SELECT * INTO v_oldest FROM orchestrator.orchestrator_lane_head(l.id, p_session, l.fired_through);
    IF r.throttle_runs IS NOT NULL THEN
        IF v_oldest.id IS NOT NULL THEN
            v_head := orchestrator.orchestrator_throttle_key(v_oldest, r);
        END IF;
        IF r.throttle_root IS NULL THEN
            -- One key, whatever waits.
            v_keys := ARRAY['_'];
        ELSE
            v_waiting_keys := ARRAY(
                SELECT orchestrator.orchestrator_throttle_key(w.event, r)
                FROM orchestrator.orchestrator_lane_waiting(l.id, p_session, l.fired_through, v_fetch) w
                ORDER BY (w.event).id);
            IF p_fetch > 0 THEN
                v_replay_keys := ARRAY(
                    SELECT orchestrator.orchestrator_throttle_key(e, r) FROM orchestrator.events e
                    WHERE e.id = ANY ((SELECT p.event_ids FROM orchestrator.replays p WHERE p.lane_id = l.id
                        ORDER BY p.id LIMIT 1)::bigint[])
                    ORDER BY e.id);
            END IF;
            v_keys := ARRAY(
                SELECT DISTINCT k FROM unnest(v_waiting_keys || coalesce(v_replay_keys, '{}') || ARRAY[v_head]
                    || ARRAY(SELECT json_array_elements_text(v_repeat -> 'batch' -> 'throttle_keys'))) k
                WHERE k IS NOT NULL);
        END IF;
        v_throttle := (
            SELECT json_object_agg(t.key, extract(epoch FROM t.starts[cardinality(t.starts) - r.throttle_runs + 1])
                + r.throttle_seconds)
            FROM orchestrator.throttle_keys t
            WHERE t.session_id = p_session AND t.listener = p_listener AND t.key = ANY (v_keys)
              AND cardinality(t.starts) >= r.throttle_runs);
    END IF;
    RETURN json_build_object(
        'lane', jsonb_build_object(
            'id', l.id, 'workflow_id', l.workflow_id, 'seq', l.seq, 'fired_through', l.fired_through,
            'routed_through', l.routed_through, 'newest_id', l.newest_id,
            'newest_at', extract(epoch FROM l.newest_at), 'throttled_until', extract(epoch FROM l.throttled_until)),
        'now', extract(epoch FROM v_now),
        'session', (SELECT jsonb_build_object('status', s.status, 'alias', s.alias) FROM orchestrator.sessions s
            WHERE s.id = p_session),
        'listener', v_listener,
        'oldest_at', extract(epoch FROM v_oldest.created_at),
        'waiting', (
            SELECT coalesce(json_agg(orchestrator.orchestrator_queued(w.event, r, w.version, p_listener, p_lane)
                ORDER BY (w.event).id), '[]'::json)
            FROM orchestrator.orchestrator_lane_waiting(l.id, p_session, l.fired_through, v_fetch) w),
        'runs', (SELECT coalesce(jsonb_agg(orchestrator.orchestrator_run_json(x) ORDER BY x.run_key), '[]')
                 FROM orchestrator.lane_runs x WHERE x.lane_id = l.id),
        'claimed', (SELECT orchestrator.orchestrator_past_batch(b) FROM orchestrator.batches b
                    WHERE b.lane_id = l.id AND b.state = 'claimed' ORDER BY b.id LIMIT 1),
        'repeat', v_repeat,
        'replay', (
            SELECT json_build_object(
                'id', p.id, 'replay_of', p.replay_of,
                'events', CASE WHEN p_fetch > 0 THEN (
                    SELECT coalesce(json_agg(orchestrator.orchestrator_queued(e, r, NULL, p_listener, p_lane)
                        ORDER BY e.id), '[]'::json)
                    FROM orchestrator.events e WHERE e.id = ANY (p.event_ids)) ELSE '[]'::json END,
                'number', 1 + (SELECT coalesce(max(b.replay), 0) FROM orchestrator.batches b
                               WHERE b.lane_id = l.id AND b.first_id = (SELECT min(x) FROM unnest(p.event_ids) x)))
            FROM orchestrator.replays p WHERE p.lane_id = l.id ORDER BY p.id LIMIT 1),
        'key_slot', (SELECT CASE WHEN k.holding THEN 'held' ELSE 'queued' END FROM orchestrator.key_slots k
            WHERE k.lane_id = l.id),
        'keys_held', (SELECT count(*) FROM orchestrator.key_slots k
                      WHERE k.session_id = p_session AND k.listener = p_listener AND k.holding),
        'fires', (SELECT jsonb_build_object('count', coalesce(max(f.fires), 0), 'oldest',
            extract(epoch FROM max(f.oldest)))
                  FROM orchestrator.orchestrator_fires_lately(p_session, p_listener, v_now) f),
        'running', orchestrator.orchestrator_running_executions(p_session),
        'throttle', CASE WHEN r.throttle_runs IS NOT NULL
            THEN json_build_object('head', v_head, 'free_at', coalesce(v_throttle, '{}'::json),
                                   'waiting', v_waiting_keys, 'replay', v_replay_keys) END);
END
$$;
