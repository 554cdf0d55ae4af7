-- How long a thread item's whole message is (0: no such item), for `orchestrator_queued`'s weight. A function of
-- its own, called only for a thread item: a sub-select in `orchestrator_queued`'s body would keep PostgreSQL from
-- inlining it, and a call of a SQL function that is not inlined cost some 25 us a waiting event a lane reads
-- (against 3 to 4 inlined: the bulk path reads every event so).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_item_bytes(p_session text, p_alias text, p_item text)
RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT octet_length(coalesce(t.message, t.message_json::text)) FROM orchestrator.thread_items t
                     WHERE t.session_id = p_session AND t.alias = p_alias AND t.id = p_item), 0)
$$;
