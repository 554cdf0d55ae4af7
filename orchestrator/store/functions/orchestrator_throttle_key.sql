-- The key an event counts under in a listener version's throttle (`core/throttles.throttle_key`): the value at its
-- path as a lane key's text, `~` when missing; `_` for a throttle with no path; null for a version with no throttle
-- (0028_listener_throttle.sql).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_throttle_key(e orchestrator.events, r orchestrator.listener_rules)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN r.throttle_runs IS NULL THEN NULL
                WHEN r.throttle_root IS NULL THEN '_'
                ELSE coalesce(orchestrator.orchestrator_key_text(
                    orchestrator.orchestrator_value(e, r.throttle_root, r.throttle_rest), NULL), '~') END
$$;
