-- A deleted listener leaves routing whole. Its versions' probes stayed (0007): a round still found them for every
-- event they met and only then left them out by the listener's `deleted_at`, so a thousand deleted listeners of a
-- type cost each event of it a thousand candidates; and a path only they probed by stayed in
-- `listener_probe_paths`, so every event read its value there, and events with no place never again took the
-- way of one lookup per type (0021). Now the deletion takes its probes, and the paths no probe is left to use.
--
-- A listener saved again after its deletion starts from its new version, as the in-memory store has it: its
-- earlier versions take no event again, not even one committed before the deletion and not yet routed. The
-- deletion takes their rules too, so neither a round's probes nor its `lane.idle` branch (which reads the rules
-- by name) finds them, and the routing in Python leaves out a version with no rule
-- (`PostgresStore.listener_versions`; `listener_rules.compile_missing_rules` compiles none of them again).
-- Of `p_paths`, those no probe uses any more. A probe's key is its alias head, its path and its value, joined by
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
