-- Whether a listener version's filter takes an event (`core/filters.listener_accepts`): not its own doing, and
-- its types, places and `where` all hold. A lane's own silence is taken apart from this (route_page, 0008).
-- Without a sub-select, so the planner writes it into the query that asks (a routing round, once per event and
-- version a probe found; a lane's read) instead of calling it (0017_fewer_calls_per_event.sql). An event with an
-- alias has that one place; one without has its graph's nodes (`orchestrator_graph_takes`).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_takes(e orchestrator.events, r orchestrator.listener_rules)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT (e.source ->> 'listener') IS DISTINCT FROM r.name
       AND (r.type_res IS NULL OR e.type ~ ANY (r.type_res))
       AND (r.alias_res IS NULL OR CASE WHEN e.alias IS NOT NULL THEN e.alias ~ ANY (r.alias_res)
                                        ELSE orchestrator.orchestrator_graph_takes(e.graph, r.alias_res) END)
       AND (r.where_conds = '[]'::jsonb OR orchestrator.orchestrator_where_holds(e, r.where_conds))
$$;
