-- A deleted listener leaves routing whole. Its versions' probes stayed (0007): a round still found them for every
-- event they met and only then left them out by the listener's `deleted_at`, so a thousand deleted listeners of a
-- type cost each event of it a thousand candidates; and a path only they probed by stayed in
-- `listener_probe_paths`, so every event read its value there, and events with no place never again took the
-- way of one lookup per type (0021). Now the deletion takes its probes, and the paths no probe is left to use.
-- A listener saved again after its deletion starts from its new version (as the in-memory store has it): its
-- earlier versions, their probes gone, take no event again.

CREATE FUNCTION orchestrator_listener_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM listener_probes WHERE name = NEW.name;
    PERFORM orchestrator_prune_probe_paths();
    RETURN NULL;
END
$$;

-- The paths no probe uses any more. A probe's key is its alias head, its path and its value, joined by chr(31)
-- (`orchestrator_probe_key`; neither an alias nor a path holds one). Under the lock a version's save takes
-- before it writes a path (`listener_rules.save_rule`): a path saved beside it, its probes not yet committed,
-- is seen once they are, never deleted from under them.
CREATE FUNCTION orchestrator_prune_probe_paths() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE listener_probe_paths IN SHARE ROW EXCLUSIVE MODE;
    DELETE FROM listener_probe_paths pp
    WHERE NOT EXISTS (SELECT 1 FROM listener_probes p WHERE split_part(p.probe_key, chr(31), 2) = pp.path);
END
$$;

CREATE TRIGGER listeners_deleted AFTER UPDATE OF deleted_at ON listeners
    FOR EACH ROW WHEN (OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL)
    EXECUTE FUNCTION orchestrator_listener_deleted();

-- What listeners deleted before this left behind.
DELETE FROM listener_probes p USING listeners l WHERE l.name = p.name AND l.deleted_at IS NOT NULL;
SELECT orchestrator_prune_probe_paths();
