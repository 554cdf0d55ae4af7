-- The key an event counts under in a listener version's throttle (`core/throttles.throttle_key`): the value at its
-- path as a lane key's text, `~` when missing; `_` for a throttle with no path; null for a version with no throttle
-- (0028_listener_throttle.sql). A throttle by alias reads the column, as a lane keyed by alias does: a lane's read
-- of 1,000 waiting events takes 4.5 ms so, 7.9 by the general walk (a path into `data`), 2.6 with no throttle by a
-- path (`bench.throttle --cases read`).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_throttle_key(e orchestrator.events, r orchestrator.listener_rules)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN r.throttle_runs IS NULL THEN NULL
                WHEN r.throttle_root IS NULL THEN '_'
                WHEN r.throttle_root = 'alias' AND cardinality(r.throttle_rest) = 0 THEN coalesce(e.alias, '~')
                ELSE coalesce(orchestrator.orchestrator_key_text(
                    orchestrator.orchestrator_value(e, r.throttle_root, r.throttle_rest), NULL), '~') END
$$;
