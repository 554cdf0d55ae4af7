-- A listener version superseded by the next leaves routing once no event can still be routed by it. A round
-- finds an event's versions by their probes (0007) and only then keeps the one in effect at the event's commit
-- (`effective_at` to `effective_until`): every version a listener ever had was met by every event of its type,
-- and a listener saved a thousand times routed each of its events past a thousand candidates (PostgreSQL alone,
-- 3.1 ms an event against 11 us with one version). The router's upkeep (`engine/probe_pruning.py`) calls this
-- with a time before which no event is still to be committed (every transaction that could have written one
-- has ended since): the versions that ended by then, and before the oldest event not yet routed, lose their
-- probes. Their rules stay: the round's `lane.idle` branch reads rules by name, and the routing in Python and
-- `explain_event` read the versions that have one (`PostgresStore.listener_versions`).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_prune_superseded_probes(p_before timestamptz)
RETURNS integer LANGUAGE plpgsql
AS $$
DECLARE
    v_oldest timestamptz;
    v_pruned integer;
    v_paths text[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM orchestrator.listener_rules r
                   WHERE r.effective_until <= p_before
                     AND EXISTS (SELECT 1 FROM orchestrator.listener_probes p WHERE p.name = r.name
                         AND p.version = r.version)) THEN
        RETURN 0;
    END IF;
    -- Before any probe, as a deletion takes it (0025): the two never hold probes the other waits for.
    LOCK TABLE orchestrator.listener_probe_paths IN SHARE ROW EXCLUSIVE MODE;
    -- The oldest event a round has still to read, in any session (a session's ids are in commit order).
    SELECT min(e.created_at) INTO v_oldest
    FROM orchestrator.sessions s
    JOIN orchestrator.routing_cursors c ON c.session_id = s.id
    CROSS JOIN LATERAL (SELECT e.created_at FROM orchestrator.events e WHERE e.session_id = s.id
        AND e.id > c.routed_event_id
                        ORDER BY e.id LIMIT 1) e
    WHERE s.last_event_id > c.routed_event_id;
    WITH gone AS (
        DELETE FROM orchestrator.listener_probes p USING orchestrator.listener_rules r
        WHERE p.name = r.name AND p.version = r.version
          AND r.effective_until <= p_before AND (v_oldest IS NULL OR r.effective_until <= v_oldest)
        RETURNING split_part(p.probe_key, chr(31), 2) AS path)
    SELECT count(*), coalesce(array_agg(DISTINCT path) FILTER (WHERE path <> ''), '{}') INTO v_pruned, v_paths
    FROM gone;
    PERFORM orchestrator.orchestrator_prune_probe_paths(v_paths);
    RETURN v_pruned;
END
$$;
