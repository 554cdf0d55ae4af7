-- The session's row shared for the rest of the transaction: what the engine's functions that append no event
-- take before anything else. It waits for nothing the writers hold (they take FOR NO KEY UPDATE), and a
-- session's deletion (FOR UPDATE first, 0003_retention.sql) waits for it or it for the deletion, never a cycle
-- through the rows each has locked after (the rows a foreign key check would lock it for come later).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_share_session(p_session text) RETURNS void LANGUAGE sql AS $$
    SELECT NULL::void FROM orchestrator.sessions WHERE id = p_session FOR KEY SHARE
$$;
