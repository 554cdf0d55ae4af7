CREATE OR REPLACE FUNCTION orchestrator.orchestrator_takes(e orchestrator.events, r orchestrator.listener_rules) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT (e.source ->> 'listener') IS DISTINCT FROM r.name
       AND (r.type_res IS NULL OR e.type ~ ANY (r.type_res))
       AND (r.alias_res IS NULL OR CASE WHEN e.alias IS NOT NULL THEN e.alias ~ ANY (r.alias_res)
                                        ELSE orchestrator.orchestrator_graph_takes(e.graph, r.alias_res) END)
       AND (r.where_conds = '[]'::jsonb OR orchestrator.orchestrator_where_holds(e, r.where_conds))
$$;
