-- A listener deleted leaves routing whole (0025_deleted_listeners_leave_routing.sql): its versions' probes and
-- rules go, and the probe paths no probe is left to use (`orchestrator_prune_probe_paths`). A listener saved again
-- after its deletion starts from its new version: its earlier versions take no event again.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_listener_deleted() RETURNS trigger LANGUAGE plpgsql
AS $$
DECLARE
    v_paths text[];
BEGIN
    -- Before any probe: a deletion and a pruning of ended versions (0026) delete probes one at a time, never each
    -- holding some the other waits for.
    LOCK TABLE orchestrator.listener_probe_paths IN SHARE ROW EXCLUSIVE MODE;
    WITH gone AS (DELETE FROM orchestrator.listener_probes WHERE name = NEW.name
        RETURNING split_part(probe_key, chr(31), 2) AS path)
    SELECT coalesce(array_agg(DISTINCT path) FILTER (WHERE path <> ''), '{}') INTO v_paths FROM gone;
    DELETE FROM orchestrator.listener_rules WHERE name = NEW.name;
    PERFORM orchestrator.orchestrator_prune_probe_paths(v_paths);
    RETURN NULL;
END
$$;
