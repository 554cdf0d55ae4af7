-- A routing round by kinds: what a page's events share (their type and their places) decided once per kind, the
-- rest (a version's `where`, its key, probes on a value) per event; 0007_routing.sql's round decided every
-- event's heads, keys and globs apart. A traced event's count of lanes is read from the hits grouped once.

CREATE OR REPLACE FUNCTION orchestrator_route_page(p_session text, p_limit integer, p_cap integer) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_from bigint;
    v_through bigint;
    v_read integer;
    v_hits orchestrator_hit[];
    v_nudges jsonb;
    v_lanes jsonb;
    v_traced jsonb;
    v_paths text[] := ARRAY(SELECT path FROM listener_probe_paths ORDER BY path);
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
    -- The page's events, each with its kind: its type and its places, all that its probes' heads and the type and
    -- alias globs read. A page holds few kinds (a bulk emit, one), so those are decided once per kind, not per
    -- event; only the values (`where`, keys, probes on `eq`) are read per event.
    WITH page AS MATERIALIZED (
        SELECT e, e.type || chr(30) || coalesce(e.alias, chr(29)) || chr(30) || coalesce(e.graph::text, chr(29)) AS kind
        FROM events e WHERE e.session_id = p_session AND e.id > v_from AND e.id <= v_through),
    kinds AS MATERIALIZED (
        SELECT k.kind, k.type, k.alias, k.graph, orchestrator_heads(k.type, '.') AS type_heads,
               orchestrator_place_heads(k.alias, k.graph) AS place_heads
        FROM (SELECT DISTINCT ON (p.kind) p.kind, (p.e).type AS type, (p.e).alias AS alias, (p.e).graph AS graph
              FROM page p ORDER BY p.kind) k),
    candidates AS (
        -- No version probes by a value: an event's keys are its kind's places (`orchestrator_event_keys`).
        SELECT p.e, p.kind, c.name, c.version
        FROM page p JOIN (
            SELECT DISTINCT k.kind, pr.name, pr.version
            FROM kinds k JOIN listener_probes pr
              ON pr.probe_key = ANY (ARRAY(SELECT h || chr(31) || chr(31) || 'null' FROM unnest(k.place_heads) h))
             AND pr.type_head = ANY (k.type_heads)) c ON c.kind = p.kind
        WHERE cardinality(v_paths) = 0
        UNION ALL
        SELECT p.e, p.kind, c.name, c.version
        FROM page p JOIN kinds k ON k.kind = p.kind
        CROSS JOIN LATERAL (
            SELECT DISTINCT pr.name, pr.version FROM listener_probes pr
            WHERE pr.probe_key = ANY (orchestrator_event_keys(p.e, v_paths)) AND pr.type_head = ANY (k.type_heads)) c
        WHERE cardinality(v_paths) > 0),
    kind_rules AS MATERIALIZED (
        -- `orchestrator_takes`' type and place globs, once per kind and version.
        SELECT c.kind, r.name, r.version
        FROM (SELECT DISTINCT c.kind, c.name, c.version FROM candidates c) c
        JOIN kinds k ON k.kind = c.kind
        JOIN listener_rules r ON r.name = c.name AND r.version = c.version
        JOIN listeners l ON l.name = r.name AND l.deleted_at IS NULL
        WHERE (r.type_res IS NULL OR k.type ~ ANY (r.type_res))
          AND (r.alias_res IS NULL OR EXISTS (
                SELECT 1 FROM unnest(orchestrator_places(k.alias, k.graph)) AS pl(place) WHERE pl.place ~ ANY (r.alias_res)))),
    matched AS (
        SELECT (c.e).id AS event_id, r.name, r.version,
               CASE WHEN r.key_root IS NULL THEN '_'
                    ELSE coalesce(orchestrator_key_text(orchestrator_value(c.e, r.key_root, r.key_rest), r.key_segments),
                                  '~') END AS lane,
               false AS own
        FROM candidates c
        JOIN kind_rules kr ON kr.kind = c.kind AND kr.name = c.name AND kr.version = c.version
        JOIN listener_rules r ON r.name = c.name AND r.version = c.version
        WHERE r.effective_at <= (c.e).created_at
          AND (r.effective_until IS NULL OR (c.e).created_at < r.effective_until)
          AND ((c.e).source ->> 'listener') IS DISTINCT FROM r.name
          AND NOT ((c.e).type = 'lane.idle' AND jsonb_typeof((c.e).data -> 'lane') = 'string'
                   AND (c.e).data ->> 'listener' = r.name)
          AND (r.where_conds = '[]'::jsonb OR orchestrator_where_holds(c.e, r.where_conds))
        UNION ALL
        -- A lane's own silence goes back to that lane, whatever the listener's filter says.
        SELECT (p.e).id, r.name, r.version, (p.e).data ->> 'lane', true
        FROM page p
        JOIN listener_rules r ON r.name = (p.e).data ->> 'listener'
        JOIN listeners l ON l.name = r.name AND l.deleted_at IS NULL
        WHERE (p.e).type = 'lane.idle' AND jsonb_typeof((p.e).data -> 'lane') = 'string'
          AND jsonb_typeof((p.e).data -> 'listener') = 'string'
          AND r.effective_at <= (p.e).created_at
          AND (r.effective_until IS NULL OR (p.e).created_at < r.effective_until))
    SELECT array_agg(ROW(m.event_id, m.name, m.lane, m.version, m.own)::orchestrator_hit ORDER BY m.name, m.lane, m.event_id)
        INTO v_hits FROM matched m;

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
        ON CONFLICT (session_id, listener, lane) DO NOTHING;

    WITH per_lane AS (
        SELECT h.listener, h.lane, max(h.version) AS version, max(h.event_id) AS through, count(*) AS events,
               max(h.event_id) FILTER (WHERE NOT h.own) AS newest_id
        FROM unnest(v_hits) h GROUP BY h.listener, h.lane),
    declared AS (
        SELECT p.*, r.window_seconds, least(r.slots, p_cap) AS run_slots, least(r.key_slots, p_cap) AS key_max,
               r.idle, (SELECT e.created_at FROM events e WHERE e.id = p.newest_id) AS newest_at
        FROM per_lane p JOIN listener_rules r ON r.name = p.listener AND r.version = p.version),
    locked AS (
        SELECT l.id, l.listener, l.lane, l.workflow_id, l.routed_through <= l.fired_through AS was_empty
        FROM lanes l JOIN declared d ON l.session_id = p_session AND l.listener = d.listener AND l.lane = d.lane
        ORDER BY l.listener, l.lane FOR UPDATE OF l)
    SELECT jsonb_agg(jsonb_build_object(
               'id', k.id, 'listener', d.listener, 'lane', d.lane, 'workflow_id', k.workflow_id,
               'version', d.version, 'through', d.through, 'events', d.events, 'newest_id', d.newest_id,
               'newest_at', d.newest_at, 'window_seconds', d.window_seconds, 'run_slots', d.run_slots,
               'key_max', d.key_max, 'idle', d.idle, 'was_empty', k.was_empty) ORDER BY d.listener, d.lane)
        INTO v_lanes
        FROM declared d JOIN locked k ON k.listener = d.listener AND k.lane = d.lane;

    INSERT INTO lane_events (lane_id, event_id, version)
        SELECT x.id, h.event_id, h.version
        FROM unnest(v_hits) h JOIN jsonb_to_recordset(v_lanes) AS x(id bigint, listener text, lane text)
          ON x.listener = h.listener AND x.lane = h.lane
        ON CONFLICT DO NOTHING;

    -- Whether each lane that was empty is blocked (its runs hold all its slots, or it waits in the queue for a
    -- key slot) or must now join that queue (keyed, every key slot taken): whoever frees the slot hands it on.
    WITH state AS (
        SELECT x, (x ->> 'id')::bigint AS id, (x ->> 'was_empty')::boolean AS was_empty,
               (x ->> 'run_slots' IS NOT NULL AND (SELECT count(*) FROM lane_runs r WHERE r.lane_id = (x ->> 'id')::bigint)
                                                   >= (x ->> 'run_slots')::integer)
               OR EXISTS (SELECT 1 FROM key_slots k WHERE k.lane_id = (x ->> 'id')::bigint AND NOT k.holding) AS blocked
        FROM jsonb_array_elements(v_lanes) x),
    queue AS (
        SELECT s.*, (s.was_empty AND NOT s.blocked AND s.x ->> 'key_max' IS NOT NULL
                     AND NOT EXISTS (SELECT 1 FROM key_slots k WHERE k.lane_id = s.id)
                     AND (SELECT count(*) FROM key_slots k WHERE k.session_id = p_session
                          AND k.listener = s.x ->> 'listener' AND k.holding) >= (s.x ->> 'key_max')::integer) AS joins
        FROM state s)
    SELECT jsonb_agg(q.x || jsonb_build_object('blocked', q.blocked OR q.joins, 'joins', q.joins) ORDER BY q.id)
        INTO v_lanes FROM queue q;

    UPDATE lanes l SET
        routed_through = greatest(l.routed_through, (x ->> 'through')::bigint),
        window_seconds = (x ->> 'window_seconds')::float8,
        run_slots = (x ->> 'run_slots')::integer,
        newest_id = CASE WHEN (x ->> 'newest_id')::bigint > l.newest_id THEN (x ->> 'newest_id')::bigint ELSE l.newest_id END,
        newest_at = CASE WHEN (x ->> 'newest_id')::bigint > l.newest_id THEN (x ->> 'newest_at')::timestamptz
                         ELSE l.newest_at END,
        nudged_at = CASE WHEN (x ->> 'was_empty')::boolean THEN clock_timestamp() ELSE l.nudged_at END
        FROM jsonb_array_elements(v_lanes) x WHERE l.id = (x ->> 'id')::bigint;
    PERFORM orchestrator_key_queue((x ->> 'id')::bigint, p_session, x ->> 'listener')
        FROM jsonb_array_elements(v_lanes) x WHERE (x ->> 'joins')::boolean ORDER BY (x ->> 'id')::bigint;

    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'listener', x ->> 'listener', 'lane', x ->> 'lane', 'workflow_id', x ->> 'workflow_id',
               'version', (x ->> 'version')::integer,
               'oldest_at', (SELECT extract(epoch FROM e.created_at) FROM lane_events w JOIN events e ON e.id = w.event_id
                             WHERE w.lane_id = l.id AND w.event_id > l.fired_through ORDER BY w.event_id LIMIT 1),
               'newest_at', extract(epoch FROM l.newest_at), 'newest_id', l.newest_id)), '[]'::jsonb)
        INTO v_nudges
        FROM jsonb_array_elements(v_lanes) x JOIN lanes l ON l.id = (x ->> 'id')::bigint
        WHERE (x ->> 'was_empty')::boolean AND (NOT (x ->> 'blocked')::boolean OR (x ->> 'idle')::boolean);

    RETURN jsonb_build_object(
        'read', v_read, 'busy', false, 'now', extract(epoch FROM clock_timestamp()), 'nudges', v_nudges,
        'lanes', (SELECT jsonb_agg(jsonb_build_object('listener', x ->> 'listener', 'lane', x ->> 'lane',
                                                      'events', (x ->> 'events')::integer))
                  FROM jsonb_array_elements(v_lanes) x),
        'traced', v_traced);
END
$$;
