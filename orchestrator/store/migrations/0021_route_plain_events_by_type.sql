-- A routing round that looks up the listeners of events with no place once per type
-- (0020_route_page_less_per_lane.sql's round otherwise):
-- - an event with no alias and no graph offers one key with no value, the same for all such events: the versions
--   that key reaches are found once per type in the page and joined to its events, where each event had an index
--   search of its own for it (an application's own events, `emit_events`); only the keys of its values at the
--   paths some version probes by are still looked up event by event, and none when no version probes by one;
-- - the page's queue rows are inserted without `ON CONFLICT`: none can exist (see the statement), and the
--   speculative insertion cost a fifth of the round.
-- - which lanes a page's events go to is a function of its own (`orchestrator_page_hits`), which the round calls:
--   a change to either half restates only that half (this one restates 0020's whole round); the probe paths
--   are read only for a round that has events to route.
-- PostgreSQL alone, a page of 1,000 such events into one serial listener: 11.0-12.1 -> 7.2-8.3 ms; beside one
-- version probing by a value, 20.9-24.0 -> 17.5-21.2 ms; beside 1,000, 17.5-21.6 -> 15.1-19.8 ms (docs/decisions.md).

-- The hits of a page of a session's events, (event, listener, lane, version, own) in (listener, lane, event)
-- order: which lanes each event goes to. The round's first half, in a function of its own so that a change to
-- either half restates only that half.
CREATE FUNCTION orchestrator_page_hits(p_session text, p_from bigint, p_through bigint) RETURNS orchestrator_hit[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_hits orchestrator_hit[];
    v_paths text[] := ARRAY(SELECT path FROM listener_probe_paths ORDER BY path);
    -- No version probes by a value: an event with no alias and no graph has no key to look up of its own.
    v_plain boolean := cardinality(v_paths) = 0;
    v_plain_keys text[] := ARRAY[chr(31) || chr(31) || 'null'];
    -- Every path some version probes by is a plain path into `data` (names and array indexes, read in place as
    -- 0018_event_keys_in_place.sql reads them): such an event offers its keys from an expression, no call.
    v_data_paths boolean := NOT EXISTS (SELECT 1 FROM unnest(v_paths) x(path)
                                        WHERE x.path !~ '^data(\.([0-9]{1,9}|[A-Za-z_][^.]*))+$');
BEGIN
    -- An event with no alias and no graph (an application's own, mostly) offers the key `v_plain_keys` (its one
    -- place head, no value), the same for all: the versions its type reaches by that key are found once per type
    -- in the page, not once per event. Materialized: a planner expecting one event (a young table's statistics)
    -- looked them up again for each.
    WITH found AS MATERIALIZED (
        SELECT DISTINCT t.type, p.name, p.version
        FROM (SELECT DISTINCT e.type FROM events e
              WHERE e.session_id = p_session AND e.id > p_from AND e.id <= p_through
                AND e.alias IS NULL AND e.graph IS NULL) t
        JOIN listener_probes p ON p.probe_key = ANY (v_plain_keys) AND p.type_head = ANY (orchestrator_heads(t.type, '.'))),
    candidates AS (
        SELECT e.id AS event_id, f.name, f.version
        FROM events e JOIN found f ON f.type = e.type
        WHERE e.session_id = p_session AND e.id > p_from AND e.id <= p_through
          AND e.alias IS NULL AND e.graph IS NULL
        UNION ALL
        -- The rest of each event's keys, looked up for each: such an event's values at the paths versions probe
        -- by (a version probes by values or by none, so it is found one way only); any other event's, all.
        SELECT DISTINCT e.id AS event_id, p.name, p.version
        FROM events e
        JOIN listener_probes p ON p.probe_key = ANY (CASE
                 WHEN e.alias IS NOT NULL OR e.graph IS NOT NULL THEN orchestrator_event_keys(e, v_paths)
                 WHEN NOT v_data_paths THEN array_remove(orchestrator_event_keys(e, v_paths), v_plain_keys[1])
                 -- `orchestrator_event_keys`' keys for the one place head '', in place.
                 ELSE ARRAY(
                     SELECT chr(31) || x.path || chr(31) || CASE jsonb_typeof(x.v) WHEN 'string' THEN x.v::text
                                                                 WHEN 'boolean' THEN x.v::text
                                                                 ELSE orchestrator_canonical(x.v) END
                     FROM (SELECT q.path, nullif(e.data #> (string_to_array(q.path, '.'))[2:], 'null'::jsonb) AS v
                           FROM unnest(v_paths) q(path)) x
                     WHERE x.v IS NOT NULL) END)
                               AND p.type_head = ANY (orchestrator_heads(e.type, '.'))
        WHERE e.session_id = p_session AND e.id > p_from AND e.id <= p_through
          AND (e.alias IS NOT NULL OR e.graph IS NOT NULL OR NOT v_plain)),
    matched AS (
        SELECT e.id AS event_id, r.name, r.version,
               CASE WHEN r.key_root IS NULL THEN '_'
                    -- A key on the alias (the most common), as `orchestrator_key_text` reads it, with no call.
                    WHEN r.key_root = 'alias' AND cardinality(r.key_rest) = 0 THEN coalesce(CASE
                         WHEN r.key_segments IS NULL THEN e.alias
                         ELSE array_to_string((string_to_array(e.alias, '/'))[1:r.key_segments], '/') END, '~')
                    ELSE coalesce(orchestrator_key_text(orchestrator_value(e, r.key_root, r.key_rest), r.key_segments),
                                  '~') END AS lane,
               false AS own
        FROM candidates c
        JOIN events e ON e.id = c.event_id
        JOIN listener_rules r ON r.name = c.name AND r.version = c.version
        JOIN listeners l ON l.name = r.name AND l.deleted_at IS NULL
        WHERE r.effective_at <= e.created_at
          AND (r.effective_until IS NULL OR e.created_at < r.effective_until)
          AND NOT (e.type = 'lane.idle' AND jsonb_typeof(e.data -> 'lane') = 'string'
                   AND e.data ->> 'listener' = r.name)
          AND orchestrator_takes(e, r)
        UNION ALL
        -- A lane's own silence goes back to that lane, whatever the listener's filter says.
        SELECT e.id, r.name, r.version, e.data ->> 'lane', true
        FROM events e
        JOIN listener_rules r ON r.name = e.data ->> 'listener'
        JOIN listeners l ON l.name = r.name AND l.deleted_at IS NULL
        WHERE e.session_id = p_session AND e.id > p_from AND e.id <= p_through
          AND e.type = 'lane.idle' AND jsonb_typeof(e.data -> 'lane') = 'string'
          AND jsonb_typeof(e.data -> 'listener') = 'string'
          AND r.effective_at <= e.created_at
          AND (r.effective_until IS NULL OR e.created_at < r.effective_until))
    SELECT array_agg(ROW(m.event_id, m.name, m.lane, m.version, m.own)::orchestrator_hit ORDER BY m.name, m.lane, m.event_id)
        INTO v_hits FROM matched m;
    RETURN v_hits;
END
$$;

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
        SELECT p.*, r.window_seconds, least(r.slots, p_cap) AS run_slots, least(r.key_slots, p_cap) AS key_max,
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
    SELECT jsonb_agg(jsonb_build_object(
               'id', k.id, 'listener', k.listener, 'lane', k.lane, 'workflow_id', k.workflow_id,
               'version', k.version, 'through', k.through, 'events', k.events, 'newest_id', k.newest_id,
               'newest_at', k.newest_at, 'window_seconds', k.window_seconds, 'run_slots', k.run_slots,
               'key_max', k.key_max, 'idle', k.idle, 'was_empty', k.was_empty, 'debounced', k.debounced)
               ORDER BY k.listener, k.lane)
        INTO v_lanes
        FROM locked k;

    -- No row can be there already: the page's events were never routed (the cursor only moves forward, and
    -- its lock keeps the session's rounds one at a time), and a hit is one per (event, listener), since one
    -- version's window holds an event's commit (`effective_until` is the next version's `effective_at`).
    INSERT INTO lane_events (lane_id, event_id, version)
        SELECT x.id, h.event_id, h.version
        FROM unnest(v_hits) h JOIN jsonb_to_recordset(v_lanes) AS x(id bigint, listener text, lane text)
          ON x.listener = h.listener AND x.lane = h.lane;

    -- Whether each lane that was empty is blocked (its runs hold all its slots, or it waits in the queue for a
    -- key slot). A keyed lane with no key slot takes one that is free now (the page's lanes in (listener, lane)
    -- order, while any are free) and is nudged to step when its window closes; with none free it joins the
    -- queue, and whoever frees a slot hands it on.
    -- Only a lane that was empty is nudged or takes a key slot: whether the others are blocked is not asked.
    WITH state AS (
        SELECT x, (x ->> 'id')::bigint AS id, (x ->> 'was_empty')::boolean AS was_empty,
               (x ->> 'was_empty')::boolean AND (
                   (x ->> 'run_slots' IS NOT NULL
                    AND (SELECT count(*) FROM lane_runs r WHERE r.lane_id = (x ->> 'id')::bigint) >= (x ->> 'run_slots')::integer)
                   OR EXISTS (SELECT 1 FROM key_slots k WHERE k.lane_id = (x ->> 'id')::bigint AND NOT k.holding)) AS blocked
        FROM jsonb_array_elements(v_lanes) x),
    keyless AS (
        SELECT s.*, (s.was_empty AND NOT s.blocked AND s.x ->> 'key_max' IS NOT NULL
                     AND NOT EXISTS (SELECT 1 FROM key_slots k WHERE k.lane_id = s.id)) AS keyless
        FROM state s),
    counted AS (
        SELECT k.*, (k.x ->> 'debounced')::boolean AS debounced,
               CASE WHEN k.keyless THEN (SELECT count(*) FROM key_slots h WHERE h.session_id = p_session
                                         AND h.listener = k.x ->> 'listener' AND h.holding) END AS held,
               row_number() OVER (PARTITION BY k.keyless, k.x ->> 'listener' ORDER BY k.x ->> 'lane' COLLATE "C") AS place
        FROM keyless k),
    -- A debounced window may stay open as long as events come: its lane is nudged to compete for a slot when
    -- it closes, as before, rather than hold one meanwhile (and joins the queue only when every slot is taken).
    placed AS (
        SELECT c.*, c.keyless AND CASE WHEN c.debounced THEN c.held >= (c.x ->> 'key_max')::integer
                                       ELSE c.held + c.place > (c.x ->> 'key_max')::integer END AS joins
        FROM counted c)
    SELECT jsonb_agg(p.x || jsonb_build_object('blocked', p.blocked OR p.joins, 'joins', p.joins,
                                               'takes', p.keyless AND NOT p.debounced AND NOT p.joins) ORDER BY p.id)
        INTO v_lanes FROM placed p;

    UPDATE lanes l SET
        routed_through = greatest(l.routed_through, (x ->> 'through')::bigint),
        window_seconds = (x ->> 'window_seconds')::float8,
        run_slots = (x ->> 'run_slots')::integer,
        newest_id = CASE WHEN (x ->> 'newest_id')::bigint > l.newest_id THEN (x ->> 'newest_id')::bigint ELSE l.newest_id END,
        newest_at = CASE WHEN (x ->> 'newest_id')::bigint > l.newest_id THEN (x ->> 'newest_at')::timestamptz
                         ELSE l.newest_at END,
        nudged_at = CASE WHEN (x ->> 'was_empty')::boolean THEN clock_timestamp() ELSE l.nudged_at END
        FROM jsonb_array_elements(v_lanes) x WHERE l.id = (x ->> 'id')::bigint;
    INSERT INTO key_slots (lane_id, session_id, listener, holding)
        SELECT (x ->> 'id')::bigint, p_session, x ->> 'listener', true
        FROM jsonb_array_elements(v_lanes) x WHERE (x ->> 'takes')::boolean ORDER BY (x ->> 'id')::bigint;
    PERFORM orchestrator_key_queue((x ->> 'id')::bigint, p_session, x ->> 'listener')
        FROM jsonb_array_elements(v_lanes) x WHERE (x ->> 'joins')::boolean
        ORDER BY x ->> 'listener' COLLATE "C", x ->> 'lane' COLLATE "C";

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

