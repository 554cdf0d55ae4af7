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
CREATE FUNCTION orchestrator_prune_probe_paths(p_paths text[]) RETURNS void LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF cardinality(p_paths) = 0 THEN
        RETURN;
    END IF;
    LOCK TABLE listener_probe_paths IN SHARE ROW EXCLUSIVE MODE;
    DELETE FROM listener_probe_paths pp
    WHERE pp.path = ANY (p_paths)
      AND NOT EXISTS (SELECT 1 FROM listener_probes p WHERE split_part(p.probe_key, chr(31), 2) = pp.path);
END
$$;

CREATE FUNCTION orchestrator_listener_deleted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    v_paths text[];
BEGIN
    -- Before any probe: a deletion and a pruning of ended versions (0026) delete probes one at a time, never each
    -- holding some the other waits for.
    LOCK TABLE listener_probe_paths IN SHARE ROW EXCLUSIVE MODE;
    WITH gone AS (DELETE FROM listener_probes WHERE name = NEW.name RETURNING split_part(probe_key, chr(31), 2) AS path)
    SELECT coalesce(array_agg(DISTINCT path) FILTER (WHERE path <> ''), '{}') INTO v_paths FROM gone;
    DELETE FROM listener_rules WHERE name = NEW.name;
    PERFORM orchestrator_prune_probe_paths(v_paths);
    RETURN NULL;
END
$$;

CREATE TRIGGER listeners_deleted AFTER UPDATE OF deleted_at ON listeners
    FOR EACH ROW WHEN (OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL)
    EXECUTE FUNCTION orchestrator_listener_deleted();

-- What listeners deleted before this left behind.
DELETE FROM listener_rules r USING listeners l WHERE l.name = r.name AND l.deleted_at IS NOT NULL;
SELECT orchestrator_prune_probe_paths(ARRAY(SELECT path FROM listener_probe_paths));
