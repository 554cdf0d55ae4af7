-- Of `p_paths`, those no probe uses any more leave `listener_probe_paths`, so events stop reading their values
-- (0025_deleted_listeners_leave_routing.sql). A probe's key is its alias head, its path and its value, joined by
-- chr(31) (`orchestrator_probe_key`; neither an alias nor a path holds one). A version's save inserts each of
-- its paths (ROW EXCLUSIVE on the table, which this lock waits for and which waits for it): a path saved beside
-- a deletion is either seen used, its probes committed before this statement's snapshot, or inserted again after.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_prune_probe_paths(p_paths text[]) RETURNS void LANGUAGE plpgsql
AS $$
BEGIN
    IF cardinality(p_paths) = 0 THEN
        RETURN;
    END IF;
    LOCK TABLE orchestrator.listener_probe_paths IN SHARE ROW EXCLUSIVE MODE;
    DELETE FROM orchestrator.listener_probe_paths pp
    WHERE pp.path = ANY (p_paths)
      AND NOT EXISTS (SELECT 1 FROM orchestrator.listener_probes p WHERE split_part(p.probe_key, chr(31), 2) = pp.path);
END
$$;
