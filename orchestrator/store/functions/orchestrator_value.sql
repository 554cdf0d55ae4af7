-- The value at a path in an event's envelope (`core/envelope_paths.resolve_in_event`): `root` the field it starts
-- in, `rest` the path below it. A thread item's `message` is its whole message, not the preview; `graph` the
-- list of the node ids a `graph.changed` names.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_value(e orchestrator.events, p_root text, p_rest text[])
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    v jsonb;
    v_whole jsonb;
BEGIN
    CASE p_root
        WHEN 'id' THEN v := to_jsonb(e.id);
        WHEN 'session_id' THEN v := to_jsonb(e.session_id);
        WHEN 'type' THEN v := to_jsonb(e.type);
        WHEN 'alias' THEN v := to_jsonb(e.alias);
        WHEN 'depth' THEN v := to_jsonb(e.depth);
        WHEN 'created_at' THEN v := to_jsonb(orchestrator.orchestrator_created_text(e.created_at));
        WHEN 'execution' THEN v := e.execution;
        WHEN 'source' THEN v := e.source;
        WHEN 'data' THEN v := e.data;
        WHEN 'cause' THEN v := e.cause;
        WHEN 'graph' THEN
            -- The list of node ids (kept as `{"nodes": [...]}`); a rule compiled from `graph.nodes...` before
            -- `graph` was the list reads it too.
            v := e.graph -> 'nodes';
            IF p_rest[1] = 'nodes' THEN
                p_rest := p_rest[2:];
            END IF;
        WHEN 'actor' THEN v := orchestrator.orchestrator_actor(e.source, e.cause);
        WHEN 'item' THEN
            v := e.item;
            IF v IS NOT NULL AND e.type = 'thread.item_posted' THEN
                SELECT coalesce(to_jsonb(t.message), t.message_json) INTO v_whole FROM orchestrator.thread_items t
                    WHERE t.session_id = e.session_id AND t.alias = e.alias AND t.id = e.item ->> 'id';
                IF v_whole IS NOT NULL THEN
                    v := jsonb_set(v, '{message}', v_whole);
                END IF;
            END IF;
        ELSE
            RETURN NULL;
    END CASE;
    RETURN orchestrator.orchestrator_walk(v, p_rest);
END
$$;
