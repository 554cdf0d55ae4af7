-- What a request's key already names, for the two forms of a write (`write_object` and `write_objects`,
-- `post_thread_item` and `post_thread_items`), under the session's lock its caller holds, so that two requests of
-- the two forms with one key at once cannot both write. The bulk form keys its writes `<key>:<index>`: 'key_reused'
-- when the other form holds the key (the single form's `<key>`, the bulk form's `<key>:0`), 'retry' when a bulk
-- request's first write is there, else 'new' (also with no key). The single form's own key is its row function's.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_request_key(p_session text, p_key text, p_bulk boolean)
RETURNS text LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_key IS NULL THEN
        RETURN 'new';
    END IF;
    IF p_bulk AND EXISTS (SELECT 1 FROM orchestrator.events e
                          WHERE e.session_id = p_session AND e.idempotency_key = p_key) THEN
        RETURN 'key_reused';
    END IF;
    IF EXISTS (SELECT 1 FROM orchestrator.events e
               WHERE e.session_id = p_session AND e.idempotency_key = p_key || ':0') THEN
        RETURN CASE WHEN p_bulk THEN 'retry' ELSE 'key_reused' END;
    END IF;
    RETURN 'new';
END
$$;
