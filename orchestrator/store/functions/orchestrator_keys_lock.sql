-- A keyed listener's lock on its key slots in a session. A function that also appends an event takes its
-- session's lock first: the session's lock is queued for behind the writers, and the keys' lock held through
-- that wait would hold every step of the listener up with it.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_keys_lock(p_session text, p_listener text)
RETURNS void LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(hashtext('keys:' || p_session || ':' || p_listener))
$$;
