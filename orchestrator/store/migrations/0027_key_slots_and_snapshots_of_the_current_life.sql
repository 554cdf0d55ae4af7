-- Two places where PostgreSQL had drifted from the in-memory lane store, found by holding the two to one contract
-- (tests/store/test_lane_store_contract.py); each function restated whole from its last version, changed only there.
--
-- A routing round gave a key slot to every lane it made pending, not only to a keyed workflow listener's: the
-- lane's cap was `least(r.key_slots, p_cap)`, and `least` passes over a null, so a listener with no key slots
-- (serial, parallel, a write action) had the deployment's cap of them, and each of its lanes took one in the round
-- (0019) only to give it back in its batch's record: a row written and deleted for nothing, a `keys_held` of 1
-- in its snapshots, and a listener re-saved as keyed whose first key queued behind the slot its serial lane
-- still held. A write action's lane was likewise given `listener_parallel_runs` run slots where it has none.
-- 0024's round otherwise.
--
-- A lane's snapshot judged its events, during the activation delay of a listener saved again after its deletion,
-- by the deleted listener's version still in effect, and started the deleted body's action: it read every version
-- of the name. It now reads the versions of the listener's current life, those that still have their rules
-- (a deletion takes them, 0025; `PostgresStore.listener_versions` reads the same): the newest in effect, or the
-- newest saved when none is yet, chosen among the rules' narrow rows and only then joined to its body (a join of
-- every version to its rule took a snapshot of a listener saved 200 times from 0.65 to 1.7 ms; this way, 0.4).
-- 0023's snapshot otherwise.

CREATE OR REPLACE FUNCTION orchestrator_route_page(p_session text, p_limit integer, p_cap integer) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_from bigint;
    v_through bigint;
    v_read integer;
    v_hits orchestrator_hit[];
    v_nudges jsonb;
    v_lanes orchestrator_page_lane[];
    v_traced jsonb;
BEGIN
    PERFORM orchestrator_share_session(p_session);
    SELECT c.routed_event_id INTO v_from FROM routing_cursors c WHERE c.session_id = p_session FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('read', 0, 'busy', EXISTS (SELECT 1 FROM routing_cursors WHERE session_id = p_session));
    END IF;
    SELECT count(*), max(e.id) INTO v_read, v_through
        FROM (SELECT e.id FROM events e WHERE e.session_id = p_session AND e.id > v_from ORDER BY e.id LIMIT p_limit) e;
    IF v_read = 0 THEN
        RETURN jsonb_build_object('read', 0, 'busy', false);
    END IF;
    v_hits := orchestrator_page_hits(p_session, v_from, v_through);

    UPDATE routing_cursors SET routed_event_id = v_through WHERE session_id = p_session;
    -- The events written under a trace, each with how many lanes it went to: its span in that trace.
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', e.id, 'type', e.type, 'traceparent', e.traceparent,
                                                 'lanes', coalesce(h.lanes, 0))), '[]'::jsonb)
        INTO v_traced
        FROM events e
        LEFT JOIN (SELECT x.event_id, count(*) AS lanes FROM unnest(coalesce(v_hits, '{}')) x GROUP BY x.event_id) h
          ON h.event_id = e.id
        WHERE e.session_id = p_session AND e.id > v_from AND e.id <= v_through AND e.traceparent IS NOT NULL;

    IF v_hits IS NULL THEN
        RETURN jsonb_build_object('read', v_read, 'busy', false, 'now', extract(epoch FROM clock_timestamp()),
                                  'nudges', '[]'::jsonb, 'lanes', '[]'::jsonb, 'traced', v_traced);
    END IF;

    -- The keys' locks of the keyed listeners queued for (a lane may join the queue for a key slot), in order,
    -- then the lanes, created as needed, locked in (listener, lane) order: 0002_lanes.sql's lock order.
    PERFORM orchestrator_keys_lock(p_session, k.listener)
        FROM (SELECT DISTINCT h.listener FROM unnest(v_hits) h
              JOIN listener_rules r ON r.name = h.listener AND r.version = h.version
              WHERE r.key_slots IS NOT NULL ORDER BY 1) k;
    INSERT INTO lanes (session_id, listener, lane, workflow_id)
        SELECT p_session, k.listener, k.lane, orchestrator_lane_workflow_id(p_session, k.listener, k.lane)
        FROM (SELECT DISTINCT h.listener, h.lane FROM unnest(v_hits) h) k
        WHERE NOT EXISTS (SELECT 1 FROM lanes l WHERE l.session_id = p_session AND l.listener = k.listener
                          AND l.lane = k.lane)
        ON CONFLICT (session_id, listener, lane) DO NOTHING;

    WITH per_lane AS (
        SELECT h.listener, h.lane, max(h.version) AS version, max(h.event_id) AS through, count(*) AS events,
               max(h.event_id) FILTER (WHERE NOT h.own) AS newest_id
        FROM unnest(v_hits) h GROUP BY h.listener, h.lane),
    declared AS MATERIALIZED (
        -- `least` passes over a null: a lane of no slots (a write action's) or no key slots (any but a keyed
        -- workflow listener's) keeps its null.
        SELECT p.*, r.window_seconds, CASE WHEN r.slots IS NOT NULL THEN least(r.slots, p_cap) END AS run_slots,
               CASE WHEN r.key_slots IS NOT NULL THEN least(r.key_slots, p_cap) END AS key_max,
               r.idle, (SELECT e.created_at FROM events e WHERE e.id = p.newest_id) AS newest_at,
               -- A debounce, read from the version's body (one lookup per keyed lane of the page): a rule column
               -- would be left false by a version saved by code from before it.
               r.key_slots IS NOT NULL AND (SELECT v.body -> 'batch' ->> 'debounce_seconds' FROM listener_versions v
                                            WHERE v.name = p.listener AND v.version = p.version) IS NOT NULL AS debounced
        FROM per_lane p JOIN listener_rules r ON r.name = p.listener AND r.version = p.version
        ORDER BY p.listener, p.lane),
    -- Each lane found by its key and locked, one after another in (listener, lane) order: a sub-select that
    -- locks is not pulled up, so it runs inside a nested loop over the materialized, ordered rows above.
    locked AS (
        SELECT d.*, l.id, l.workflow_id, l.routed_through <= l.fired_through AS was_empty
        FROM declared d
        CROSS JOIN LATERAL (SELECT l.id, l.workflow_id, l.routed_through, l.fired_through FROM lanes l
                            WHERE l.session_id = p_session AND l.listener = d.listener AND l.lane = d.lane
                            FOR UPDATE) l)
    SELECT array_agg(ROW(k.id, k.listener, k.lane, k.workflow_id, k.version, k.through, k.events, k.newest_id,
                         k.newest_at, k.window_seconds, k.run_slots, k.key_max, k.idle, k.was_empty, k.debounced,
                         NULL, NULL, NULL)::orchestrator_page_lane ORDER BY k.listener, k.lane)
        INTO v_lanes
        FROM locked k;

    -- No row can be there already: the page's events were never routed (the cursor only moves forward, and
    -- its lock keeps the session's rounds one at a time), and a hit is one per (event, listener), since one
    -- version's window holds an event's commit (`effective_until` is the next version's `effective_at`).
    INSERT INTO lane_events (lane_id, event_id, version)
        SELECT x.id, h.event_id, h.version
        FROM unnest(v_hits) h JOIN unnest(v_lanes) x ON x.listener = h.listener AND x.lane = h.lane;

    -- Whether each lane that was empty is blocked (its runs hold all its slots, or it waits in the queue for a
    -- key slot). A keyed lane with no key slot takes one that is free now (the page's lanes in (listener, lane)
    -- order, while any are free) and is nudged to step when its window closes; with none free it joins the
    -- queue, and whoever frees a slot hands it on.
    -- Only a lane that was empty is nudged or takes a key slot: whether the others are blocked is not asked.
    WITH state AS (
        SELECT x.*, x.was_empty AND (
                   (x.run_slots IS NOT NULL
                    AND (SELECT count(*) FROM lane_runs r WHERE r.lane_id = x.id) >= x.run_slots)
                   OR EXISTS (SELECT 1 FROM key_slots k WHERE k.lane_id = x.id AND NOT k.holding)) AS held_up
        FROM unnest(v_lanes) x),
    keyless AS (
        SELECT s.*, (s.was_empty AND NOT s.held_up AND s.key_max IS NOT NULL
                     AND NOT EXISTS (SELECT 1 FROM key_slots k WHERE k.lane_id = s.id)) AS keyless
        FROM state s),
    counted AS (
        SELECT k.*,
               CASE WHEN k.keyless THEN (SELECT count(*) FROM key_slots h WHERE h.session_id = p_session
                                         AND h.listener = k.listener AND h.holding) END AS held,
               row_number() OVER (PARTITION BY k.keyless, k.listener ORDER BY k.lane COLLATE "C") AS place
        FROM keyless k),
    -- A debounced window may stay open as long as events come: its lane is nudged to compete for a slot when
    -- it closes, as before, rather than hold one meanwhile (and joins the queue only when every slot is taken).
    placed AS (
        SELECT c.*, c.keyless AND CASE WHEN c.debounced THEN c.held >= c.key_max
                                       ELSE c.held + c.place > c.key_max END AS joining
        FROM counted c)
    SELECT array_agg(ROW(p.id, p.listener, p.lane, p.workflow_id, p.version, p.through, p.events, p.newest_id,
                         p.newest_at, p.window_seconds, p.run_slots, p.key_max, p.idle, p.was_empty, p.debounced,
                         p.held_up OR p.joining, p.joining,
                         p.keyless AND NOT p.debounced AND NOT p.joining)::orchestrator_page_lane ORDER BY p.id)
        INTO v_lanes FROM placed p;

    UPDATE lanes l SET
        routed_through = greatest(l.routed_through, x.through),
        window_seconds = x.window_seconds,
        run_slots = x.run_slots,
        newest_id = CASE WHEN x.newest_id > l.newest_id THEN x.newest_id ELSE l.newest_id END,
        newest_at = CASE WHEN x.newest_id > l.newest_id THEN x.newest_at ELSE l.newest_at END,
        nudged_at = CASE WHEN x.was_empty THEN clock_timestamp() ELSE l.nudged_at END
        FROM unnest(v_lanes) x WHERE l.id = x.id;
    INSERT INTO key_slots (lane_id, session_id, listener, holding)
        SELECT x.id, p_session, x.listener, true FROM unnest(v_lanes) x WHERE x.takes ORDER BY x.id;
    PERFORM orchestrator_key_queue(x.id, p_session, x.listener)
        FROM unnest(v_lanes) x WHERE x.joins ORDER BY x.listener COLLATE "C", x.lane COLLATE "C";

    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'listener', x.listener, 'lane', x.lane, 'workflow_id', x.workflow_id, 'version', x.version,
               'oldest_at', (SELECT extract(epoch FROM e.created_at) FROM lane_events w JOIN events e ON e.id = w.event_id
                             WHERE w.lane_id = l.id AND w.event_id > l.fired_through ORDER BY w.event_id LIMIT 1),
               'newest_at', extract(epoch FROM l.newest_at), 'newest_id', l.newest_id)), '[]'::jsonb)
        INTO v_nudges
        FROM unnest(v_lanes) x JOIN lanes l ON l.id = x.id
        WHERE x.was_empty AND (NOT x.blocked OR x.idle);

    RETURN jsonb_build_object(
        'read', v_read, 'busy', false, 'now', extract(epoch FROM clock_timestamp()), 'nudges', v_nudges,
        'lanes', (SELECT jsonb_agg(jsonb_build_object('listener', x.listener, 'lane', x.lane, 'events', x.events))
                  FROM unnest(v_lanes) x),
        'traced', v_traced);
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
    FROM listeners n
    -- Of the listener's current life: a deletion took its versions' rules (0025).
    CROSS JOIN LATERAL (SELECT lr.version FROM listener_rules lr WHERE lr.name = n.name
                        ORDER BY lr.effective_at <= v_now DESC, lr.version DESC LIMIT 1) c
    JOIN listener_versions v ON v.name = n.name AND v.version = c.version
    WHERE n.name = p_listener AND n.deleted_at IS NULL;
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
