-- A lane's read, an event's insert and a filter's test, each with less done per event.
--
-- Tried and left out: a routing round (0013_traced_lanes.sql's) that found a page's type heads once. A page of
-- 1,000 plain events routed in 16 us an event instead of 25, but the heads, a constant of the plan, let the
-- planner scan every probe for every event beside 1,000 listeners told apart by a `where` (13 ms an event).
--
-- A waiting event's row (0008_by_reference.sql's `orchestrator_queued`) carries its pointer's parts as columns
-- (type, alias, item id, execution id, nodes) rather than a JSON object built per event and stripped of its
-- nulls: a lane's read of 1,000 waiting events, 6.5 -> 2.7 ms. The pointer is put together by the store's reader
-- (`lanes_pg.queued_of`) with `core/events.pointer`, as `message_of` puts an envelope's together.
--
-- An event's row no longer checks its session by a foreign key: the check was a query and a row lock per
-- event (a bulk emit of 1,000: 14-16 -> 6-11 us an event), and what it promised holds without it. Every
-- insert into `events` is made under the session's row lock, taken by `orchestrator_lock_session`, which finds
-- the session and refuses one being deleted; a session is deleted (0003_retention.sql) only once marked
-- `deleting` (an update that waits for that lock) and once its events are gone, so none can be left behind.

ALTER TABLE events DROP CONSTRAINT events_session_id_fkey;

-- Whether a listener version's filter takes an event (0007_routing.sql's, the same rule): now without a
-- sub-select, so the planner writes it into the query that asks (a routing round, once per event and version
-- a probe found; a lane's read) instead of calling it. An event with an alias has that one place; one without
-- has its graph's nodes, matched by a function of their own. A page of 1,000 plain events routed in 20 us an
-- event instead of 25; 1,000 aliases beside 1,000 listeners on alias trees, 38 instead of 61-76.
CREATE FUNCTION orchestrator_graph_takes(p_graph jsonb, p_res text[]) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT EXISTS (SELECT 1 FROM unnest(orchestrator_places(NULL, p_graph)) AS pl(place) WHERE pl.place ~ ANY (p_res))
$$;

CREATE OR REPLACE FUNCTION orchestrator_takes(e events, r listener_rules) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT (e.source ->> 'listener') IS DISTINCT FROM r.name
       AND (r.type_res IS NULL OR e.type ~ ANY (r.type_res))
       AND (r.alias_res IS NULL OR CASE WHEN e.alias IS NOT NULL THEN e.alias ~ ANY (r.alias_res)
                                        ELSE orchestrator_graph_takes(e.graph, r.alias_res) END)
       AND (r.where_conds = '[]'::jsonb OR orchestrator_where_holds(e, r.where_conds))
$$;

CREATE OR REPLACE FUNCTION orchestrator_queued(e events, r listener_rules, p_version integer, p_listener text, p_lane text)
RETURNS json LANGUAGE sql STABLE AS $$
    SELECT json_build_array(
        e.id, extract(epoch FROM e.created_at), e.depth, pg_column_size(e.*),
        CASE WHEN r.distinct_root IS NOT NULL
             THEN orchestrator_canonical(orchestrator_value(e, r.distinct_root, r.distinct_rest)) END,
        coalesce(r.name IS NULL OR p_version = r.version
                 OR (e.type = 'lane.idle' AND e.data ->> 'listener' = p_listener AND e.data ->> 'lane' = p_lane)
                 OR orchestrator_takes(e, r), false),
        e.traceparent, e.type, e.alias, e.item ->> 'id', e.execution ->> 'id',
        CASE WHEN jsonb_typeof(e.graph -> 'nodes') = 'array' THEN e.graph -> 'nodes' END)
$$;

-- Its only caller was the row above as 0008 wrote it.
DROP FUNCTION orchestrator_message(events);
