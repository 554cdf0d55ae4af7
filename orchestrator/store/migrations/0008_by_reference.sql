-- Events by reference: a lane reads what its step decides by and where a run is to look, never envelopes. Each
-- waiting event is read as a compact row (`orchestrator_queued`): its id, commit, depth, size, its `distinct_by`
-- value and whether the listener as declared now takes it (both under the version in effect now, as compiled in
-- `listener_rules`), its write's traceparent, and its pointer (`batch.messages`' form). The driver reads events
-- whole only for a template that names them (`orchestrator_events_json`, by id).

-- The pointer a run gets in `batch.messages` (`core/events.message_of`), key for key and in its order.
CREATE FUNCTION orchestrator_message(e events) RETURNS json LANGUAGE sql IMMUTABLE AS $$
    SELECT json_strip_nulls(json_build_object(
        'id', e.id, 'type', e.type, 'alias', e.alias, 'item_id', e.item ->> 'id', 'execution_id', e.execution ->> 'id',
        'nodes', CASE WHEN jsonb_typeof(e.graph -> 'nodes') = 'array' THEN e.graph -> 'nodes' END))
$$;

-- A waiting event as `lane_snapshot.Queued`: [id, commit, depth, size, distinct, accepted, traceparent, message].
-- `r` is the listener version in effect now (null: deleted); `p_version` the version the event was routed by
-- (null: not known, so asked again), `p_listener`/`p_lane` the lane, whose own silence it always takes.
CREATE FUNCTION orchestrator_queued(e events, r listener_rules, p_version integer, p_listener text, p_lane text)
RETURNS json LANGUAGE sql STABLE AS $$
    SELECT json_build_array(
        e.id, extract(epoch FROM e.created_at), e.depth, pg_column_size(e.*),
        CASE WHEN r.distinct_root IS NOT NULL
             THEN orchestrator_canonical(orchestrator_value(e, r.distinct_root, r.distinct_rest)) END,
        coalesce(r.name IS NULL OR p_version = r.version
                 OR (e.type = 'lane.idle' AND e.data ->> 'listener' = p_listener AND e.data ->> 'lane' = p_lane)
                 OR orchestrator_takes(e, r), false),
        e.traceparent, orchestrator_message(e))
$$;

-- A batch the lane took before, with its entries (by reference) and the run it started (or repeats).
CREATE OR REPLACE FUNCTION orchestrator_past_batch(b batches) RETURNS json LANGUAGE sql STABLE AS $$
    SELECT json_build_object(
        'batch', orchestrator_batch_json(b),
        'entries', (SELECT coalesce(json_agg(orchestrator_queued(e, NULL::listener_rules, NULL, NULL, NULL) ORDER BY e.id),
                                    '[]'::json)
                    FROM events e WHERE e.id = ANY (b.entry_ids)),
        'run', (SELECT orchestrator_run_json(r) FROM lane_runs r WHERE r.run_key = b.run_key))
$$;

-- The lane step's snapshot (0002_lanes.sql's, by reference): as before, its waiting events and a replay's read
-- as compact rows under the listener version in effect now.
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
        'fires', (SELECT jsonb_build_object('count', count(*), 'oldest', extract(epoch FROM min(b.created_at)))
                  FROM batches b WHERE b.session_id = p_session AND b.listener = p_listener AND b.counted
                  AND b.created_at > v_now - interval '60 seconds'),
        'running', (SELECT count(*) FROM executions x WHERE x.session_id = p_session AND x.status = 'running'));
END
$$;
