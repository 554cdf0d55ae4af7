-- Whether a wait's condition (or a cancel watch's) takes an event: its types, places and `where` hold, as a
-- listener version's filter's do (`orchestrator_takes`), and for a cancel watch the event's value at the
-- condition's key, as a lane key, is the watching run's lane key (`p_lane`). Who wrote the event is the caller's
-- to judge (a run's own writes never answer its waits).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_condition_takes(
    e orchestrator.events, k orchestrator.wait_conditions, p_lane text
) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT (k.type_res IS NULL OR e.type ~ ANY (k.type_res))
       AND (k.alias_res IS NULL OR CASE WHEN e.alias IS NOT NULL THEN e.alias ~ ANY (k.alias_res)
                                        ELSE orchestrator.orchestrator_graph_takes(e.graph, k.alias_res) END)
       AND (k.where_conds = '[]'::jsonb OR orchestrator.orchestrator_where_holds(e, k.where_conds))
       AND (k.key_root IS NULL OR orchestrator.orchestrator_key_text(
               orchestrator.orchestrator_value(e, k.key_root, k.key_rest), k.key_segments) = p_lane)
$$;
