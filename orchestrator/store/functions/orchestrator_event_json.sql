-- An event as the engine reads it (a thread item's whole message, `p_whole`, beside the preview), with its
-- commit in epoch seconds. Plain `json`, as everything that carries events to the driver, and one expression
-- that PostgreSQL inlines into its caller: a lane reads up to a thousand at a time, and a `jsonb` built by a
-- function call per event cost ten times as much.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_event_json(e orchestrator.events, p_whole jsonb)
RETURNS json LANGUAGE sql STABLE AS $$
    SELECT json_build_object(
        'id', e.id, 'session_id', e.session_id, 'type', e.type, 'alias', e.alias, 'item', e.item,
        'execution', e.execution, 'source', e.source, 'depth', e.depth, 'data', e.data, 'cause', e.cause,
        'graph', e.graph, 'created_at', e.created_at, 'committed', extract(epoch FROM e.created_at),
        'traceparent', e.traceparent, 'whole_message', p_whole)
$$;
