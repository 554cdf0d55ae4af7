-- Events whole, by id, in id order (`orchestrator_event_json` each, with a thread item's whole message): what
-- the driver reads only for a template that names them.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_events_json(p_ids bigint[]) RETURNS json LANGUAGE sql STABLE AS $$
    SELECT coalesce(json_agg(orchestrator.orchestrator_event_json(e, coalesce(to_jsonb(t.message), t.message_json))
        ORDER BY e.id),
                    '[]'::json)
    FROM orchestrator.events e
    LEFT JOIN orchestrator.thread_items t ON e.type = 'thread.item_posted' AND t.session_id = e.session_id
        AND t.alias = e.alias
                             AND t.id = e.item ->> 'id'
    WHERE e.id = ANY (p_ids)
$$;
