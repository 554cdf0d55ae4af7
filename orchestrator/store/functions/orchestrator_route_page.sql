-- One routing round for a session: up to `p_limit` events after its position, matched against every listener
-- version in effect at their commit, queued into their lanes, and the position moved past them; in one call.
-- Only one round per session at a time: a round holds the session's position row (one that finds it held
-- answers `busy` and leaves it to the other). Answers the events read, the lanes that went from empty to
-- pending and need a nudge (with the version whose timing tells when; in the order the lanes were made, whatever
-- order the join reads them in), each lane's count of events queued (for the metrics), and the traced events (for
-- their spans, in id order). `p_cap` is the deployment's `listener_parallel_runs`.
--
-- Which lanes the events go to is `orchestrator_page_hits`. The page's lanes are carried from statement to
-- statement as rows of their own type (`orchestrator_page_lane`, 0024), found by their key and locked in
-- (listener, lane) order; a keyed lane that turns pending takes a key slot that is free at once, the rest join
-- the queue without a nudge, a debounced listener's lanes excepted (0019); the queue is written as ranges of the
-- page's events, one for each run of them into a lane (0032), without `ON CONFLICT` (none can overlap, 0021). How
-- each of these came and what it saved: the headers of 0013, 0019, 0020, 0021, 0024 and 0032, and
-- docs/decisions.md.
--
-- The page also answers the session's open waits (`orchestrator_answer_waits`, 0027): an event a run's wait takes
-- is left out of the lanes of that run's listener (other listeners still get it), and the answers go back for the
-- router to tell the runs.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_route_page(p_session text, p_limit integer, p_cap integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_from bigint;
    v_through bigint;
    v_read integer;
    -- The page's event ids in order: an event's place in the page is its place here.
    v_page bigint[];
    v_hits orchestrator.orchestrator_hit[];
    v_nudges jsonb;
    v_lanes orchestrator.orchestrator_page_lane[];
    v_traced jsonb;
    v_answers jsonb;
BEGIN
    PERFORM orchestrator.orchestrator_share_session(p_session);
    SELECT c.routed_event_id INTO v_from FROM orchestrator.routing_cursors c
        WHERE c.session_id = p_session FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('read', 0, 'busy', EXISTS (SELECT 1 FROM orchestrator.routing_cursors
            WHERE session_id = p_session));
    END IF;
    v_page := ARRAY(SELECT e.id FROM orchestrator.events e WHERE e.session_id = p_session AND e.id > v_from
                    ORDER BY e.id LIMIT p_limit);
    v_read := cardinality(v_page);
    v_through := v_page[v_read];
    IF v_read = 0 THEN
        RETURN jsonb_build_object('read', 0, 'busy', false);
    END IF;
    v_hits := orchestrator.orchestrator_page_hits(p_session, v_from, v_through);
    v_answers := orchestrator.orchestrator_answer_waits(p_session, v_from, v_through);
    IF v_answers IS NOT NULL AND v_hits IS NOT NULL THEN
        v_hits := ARRAY(
            SELECT ROW(h.event_id, h.listener, h.lane, h.version, h.own)::orchestrator.orchestrator_hit
            FROM unnest(v_hits) WITH ORDINALITY AS h(event_id, listener, lane, version, own, n)
            WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v_answers) a
                              WHERE a ->> 'kind' = 'wait' AND a ->> 'listener' = h.listener
                                AND a -> 'event_ids' @> to_jsonb(h.event_id))
            ORDER BY h.n);
        IF cardinality(v_hits) = 0 THEN
            v_hits := NULL;
        END IF;
    END IF;

    UPDATE orchestrator.routing_cursors SET routed_event_id = v_through WHERE session_id = p_session;
    -- The events written under a trace, each with how many lanes it went to: its span in that trace.
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', e.id, 'type', e.type, 'traceparent', e.traceparent,
                                                 'lanes', coalesce(h.lanes, 0)) ORDER BY e.id), '[]'::jsonb)
        INTO v_traced
        FROM orchestrator.events e
        LEFT JOIN (SELECT x.event_id, count(*) AS lanes FROM unnest(coalesce(v_hits, '{}')) x GROUP BY x.event_id) h
          ON h.event_id = e.id
        WHERE e.session_id = p_session AND e.id > v_from AND e.id <= v_through AND e.traceparent IS NOT NULL;

    IF v_hits IS NULL THEN
        RETURN jsonb_build_object('read', v_read, 'busy', false, 'now', extract(epoch FROM clock_timestamp()),
                                  'nudges', '[]'::jsonb, 'lanes', '[]'::jsonb, 'traced', v_traced,
                                  'answers', coalesce(v_answers, '[]'::jsonb));
    END IF;

    -- The keys' locks of the keyed listeners queued for (a lane may join the queue for a key slot), in order,
    -- then the lanes, created as needed, locked in (listener, lane) order: 0002_lanes.sql's lock order. Made in
    -- that order too: a new lane's id, and so its nudge's place, follows it, not the order a hashed `DISTINCT`
    -- answers in.
    PERFORM orchestrator.orchestrator_keys_lock(p_session, k.listener)
        FROM (SELECT DISTINCT h.listener FROM unnest(v_hits) h
              JOIN orchestrator.listener_rules r ON r.name = h.listener AND r.version = h.version
              WHERE r.key_slots IS NOT NULL ORDER BY 1) k;
    INSERT INTO orchestrator.lanes (session_id, listener, lane, workflow_id)
        SELECT p_session, k.listener, k.lane, orchestrator.orchestrator_lane_workflow_id(p_session, k.listener, k.lane)
        FROM (SELECT DISTINCT h.listener, h.lane FROM unnest(v_hits) h) k
        WHERE NOT EXISTS (SELECT 1 FROM orchestrator.lanes l WHERE l.session_id = p_session AND l.listener = k.listener
                          AND l.lane = k.lane)
        ORDER BY k.listener, k.lane
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
               r.idle, (SELECT e.created_at FROM orchestrator.events e WHERE e.id = p.newest_id) AS newest_at,
               -- A debounce, read from the version's body (one lookup per keyed lane of the page): a rule column
               -- would be left false by a version saved by code from before it.
               r.key_slots IS NOT NULL AND (SELECT v.body -> 'batch' ->> 'debounce_seconds'
                   FROM orchestrator.listener_versions v
                                            WHERE v.name = p.listener AND v.version = p.version) IS NOT NULL AS
                                                debounced
        FROM per_lane p JOIN orchestrator.listener_rules r ON r.name = p.listener AND r.version = p.version
        ORDER BY p.listener, p.lane),
    -- Each lane found by its key and locked, one after another in (listener, lane) order: a sub-select that
    -- locks is not pulled up, so it runs inside a nested loop over the materialized, ordered rows above.
    locked AS (
        SELECT d.*, l.id, l.workflow_id, l.routed_through <= l.fired_through AS was_empty
        FROM declared d
        CROSS JOIN LATERAL (SELECT l.id, l.workflow_id, l.routed_through, l.fired_through FROM orchestrator.lanes l
                            WHERE l.session_id = p_session AND l.listener = d.listener AND l.lane = d.lane
                            FOR UPDATE) l)
    SELECT array_agg(ROW(k.id, k.listener, k.lane, k.workflow_id, k.version, k.through, k.events, k.newest_id,
                         k.newest_at, k.window_seconds, k.run_slots, k.key_max, k.idle, k.was_empty, k.debounced,
                         NULL, NULL, NULL)::orchestrator.orchestrator_page_lane ORDER BY k.listener, k.lane)
        INTO v_lanes
        FROM locked k;

    -- Queued as ranges (0032_lane_queue_ranges.sql): a lane's hits that are the page's events one after another,
    -- under one version, are one range (an event's place in the page less its place among its lane's hits is
    -- the same along such a run). No range can overlap one there already: the page's events were never routed
    -- (the cursor only moves forward, and its lock keeps the session's rounds one at a time), and a hit is one
    -- per (event, listener), since one version's window holds an event's commit (`effective_until` is the next
    -- version's `effective_at`).
    INSERT INTO orchestrator.lane_queue (lane_id, first_id, last_id, version)
        SELECT r.lane_id, min(r.event_id), max(r.event_id), r.version
        FROM (SELECT x.id AS lane_id, h.event_id, h.version,
                     p.n - row_number() OVER (PARTITION BY x.id, h.version ORDER BY h.event_id) AS run
              FROM unnest(v_hits) h
              JOIN unnest(v_lanes) x ON x.listener = h.listener AND x.lane = h.lane
              JOIN unnest(v_page) WITH ORDINALITY AS p(id, n) ON p.id = h.event_id) r
        GROUP BY r.lane_id, r.version, r.run;

    -- Whether each lane that was empty is blocked (its runs hold all its slots, or it waits in the queue for a
    -- key slot). A keyed lane with no key slot takes one that is free now (the page's lanes in (listener, lane)
    -- order, while any are free) and is nudged to step when its window closes; with none free it joins the
    -- queue, and whoever frees a slot hands it on.
    -- Only a lane that was empty is nudged or takes a key slot: whether the others are blocked is not asked.
    WITH state AS (
        SELECT x.*, x.was_empty AND (
                   (x.run_slots IS NOT NULL
                    AND (SELECT count(*) FROM orchestrator.lane_runs r WHERE r.lane_id = x.id) >= x.run_slots)
                   OR EXISTS (SELECT 1 FROM orchestrator.key_slots k WHERE k.lane_id = x.id
                       AND NOT k.holding)) AS held_up
        FROM unnest(v_lanes) x),
    keyless AS (
        SELECT s.*, (s.was_empty AND NOT s.held_up AND s.key_max IS NOT NULL
                     AND NOT EXISTS (SELECT 1 FROM orchestrator.key_slots k WHERE k.lane_id = s.id)) AS keyless
        FROM state s),
    counted AS (
        SELECT k.*,
               CASE WHEN k.keyless THEN (SELECT count(*) FROM orchestrator.key_slots h WHERE h.session_id = p_session
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
                         p.keyless AND NOT p.debounced AND NOT p.joining)::orchestrator.orchestrator_page_lane
                             ORDER BY p.id)
        INTO v_lanes FROM placed p;

    UPDATE orchestrator.lanes l SET
        routed_through = greatest(l.routed_through, x.through),
        window_seconds = x.window_seconds,
        run_slots = x.run_slots,
        newest_id = CASE WHEN x.newest_id > l.newest_id THEN x.newest_id ELSE l.newest_id END,
        newest_at = CASE WHEN x.newest_id > l.newest_id THEN x.newest_at ELSE l.newest_at END,
        nudged_at = CASE WHEN x.was_empty THEN clock_timestamp() ELSE l.nudged_at END
        FROM unnest(v_lanes) x WHERE l.id = x.id;
    INSERT INTO orchestrator.key_slots (lane_id, session_id, listener, holding)
        SELECT x.id, p_session, x.listener, true FROM unnest(v_lanes) x WHERE x.takes ORDER BY x.id;
    PERFORM orchestrator.orchestrator_key_queue(x.id, p_session, x.listener)
        FROM unnest(v_lanes) x WHERE x.joins ORDER BY x.listener COLLATE "C", x.lane COLLATE "C";

    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'listener', x.listener, 'lane', x.lane, 'workflow_id', x.workflow_id, 'version', x.version,
               'oldest_at', (SELECT extract(epoch FROM e.created_at)
                             FROM orchestrator.orchestrator_lane_head(l.id, p_session, l.fired_through) e),
               'newest_at', extract(epoch FROM l.newest_at), 'newest_id', l.newest_id) ORDER BY x.id), '[]'::jsonb)
        INTO v_nudges
        FROM unnest(v_lanes) x JOIN orchestrator.lanes l ON l.id = x.id
        WHERE x.was_empty AND (NOT x.blocked OR x.idle);

    RETURN jsonb_build_object(
        'read', v_read, 'busy', false, 'now', extract(epoch FROM clock_timestamp()), 'nudges', v_nudges,
        'lanes', (SELECT jsonb_agg(jsonb_build_object('listener', x.listener, 'lane', x.lane, 'events', x.events))
                  FROM unnest(v_lanes) x),
        'traced', v_traced, 'answers', coalesce(v_answers, '[]'::jsonb));
END
$$;
