-- The hits of a page of a session's events, (event, listener, lane, version, own) in (listener, lane, event)
-- order: which lanes each event goes to, the routing round's first half (`orchestrator_route_page` is the
-- other). An event with no alias and no graph offers one key with no value, the same for all such events: the
-- versions that key reaches are found once per type in the page and joined to its events; only the keys of its
-- values at the paths some version probes by are looked up event by event, and none when no version probes by
-- one; the probe paths are read only for a page that has events (0021_route_plain_events_by_type.sql: a page of
-- 1,000 such events into one serial listener, 11.0-12.1 -> 7.2-8.3 ms, docs/decisions.md).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_page_hits(p_session text, p_from bigint, p_through bigint)
RETURNS orchestrator.orchestrator_hit[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_hits orchestrator.orchestrator_hit[];
    v_paths text[] := ARRAY(SELECT path FROM orchestrator.listener_probe_paths ORDER BY path);
    -- No version probes by a value: an event with no alias and no graph has no key to look up of its own.
    v_plain boolean := cardinality(v_paths) = 0;
    v_plain_keys text[] := ARRAY[chr(31) || chr(31) || 'null'];
    -- Every path some version probes by is a plain path into `data` (names and array indexes, read in place as
    -- 0018_event_keys_in_place.sql reads them): such an event offers its keys from an expression, no call.
    v_data_paths boolean := NOT EXISTS (SELECT 1 FROM unnest(v_paths) x(path)
                                        WHERE x.path !~ '^data(\.([0-9]{1,9}|[A-Za-z_][^.]*))+$');
BEGIN
    -- An event with no alias and no graph (an application's own, mostly) offers the key `v_plain_keys` (its one
    -- place head, no value), the same for all: the versions its type reaches by that key are found once per type
    -- in the page, not once per event. Materialized: a planner expecting one event (a young table's statistics)
    -- looked them up again for each.
    WITH found AS MATERIALIZED (
        SELECT DISTINCT t.type, p.name, p.version
        FROM (SELECT DISTINCT e.type FROM orchestrator.events e
              WHERE e.session_id = p_session AND e.id > p_from AND e.id <= p_through
                AND e.alias IS NULL AND e.graph IS NULL) t
        JOIN orchestrator.listener_probes p ON p.probe_key = ANY (v_plain_keys)
            AND p.type_head = ANY (orchestrator.orchestrator_heads(t.type, '.'))),
    candidates AS (
        SELECT e.id AS event_id, f.name, f.version
        FROM orchestrator.events e JOIN found f ON f.type = e.type
        WHERE e.session_id = p_session AND e.id > p_from AND e.id <= p_through
          AND e.alias IS NULL AND e.graph IS NULL
        UNION ALL
        -- The rest of each event's keys, looked up for each: such an event's values at the paths versions probe
        -- by (a version probes by values or by none, so it is found one way only); any other event's, all.
        SELECT DISTINCT e.id AS event_id, p.name, p.version
        FROM orchestrator.events e
        JOIN orchestrator.listener_probes p ON p.probe_key = ANY (CASE
                 WHEN e.alias IS NOT NULL OR e.graph IS NOT NULL THEN orchestrator.orchestrator_event_keys(e, v_paths)
                 WHEN NOT v_data_paths THEN array_remove(orchestrator.orchestrator_event_keys(e, v_paths),
                     v_plain_keys[1])
                 -- `orchestrator_event_keys`' keys for the one place head '', in place.
                 ELSE ARRAY(
                     SELECT chr(31) || x.path || chr(31) || CASE jsonb_typeof(x.v) WHEN 'string' THEN x.v::text
                                                                 WHEN 'boolean' THEN x.v::text
                                                                 ELSE orchestrator.orchestrator_canonical(x.v) END
                     FROM (SELECT q.path, nullif(e.data #> (string_to_array(q.path, '.'))[2:], 'null'::jsonb) AS v
                           FROM unnest(v_paths) q(path)) x
                     WHERE x.v IS NOT NULL) END)
                               AND p.type_head = ANY (orchestrator.orchestrator_heads(e.type, '.'))
        WHERE e.session_id = p_session AND e.id > p_from AND e.id <= p_through
          AND (e.alias IS NOT NULL OR e.graph IS NOT NULL OR NOT v_plain)),
    matched AS (
        SELECT e.id AS event_id, r.name, r.version,
               CASE WHEN r.key_root IS NULL THEN '_'
                    -- A key on the alias (the most common), as `orchestrator_key_text` reads it, with no call.
                    WHEN r.key_root = 'alias' AND cardinality(r.key_rest) = 0 THEN coalesce(CASE
                         WHEN r.key_segments IS NULL THEN e.alias
                         ELSE array_to_string((string_to_array(e.alias, '/'))[1:r.key_segments], '/') END, '~')
                    ELSE coalesce(orchestrator.orchestrator_key_text(orchestrator.orchestrator_value(e, r.key_root,
                        r.key_rest), r.key_segments),
                                  '~') END AS lane,
               false AS own
        FROM candidates c
        JOIN orchestrator.events e ON e.id = c.event_id
        JOIN orchestrator.listener_rules r ON r.name = c.name AND r.version = c.version
        JOIN orchestrator.listeners l ON l.name = r.name AND l.deleted_at IS NULL
        WHERE r.effective_at <= e.created_at
          AND (r.effective_until IS NULL OR e.created_at < r.effective_until)
          AND NOT (e.type = 'lane.idle' AND jsonb_typeof(e.data -> 'lane') = 'string'
                   AND e.data ->> 'listener' = r.name)
          AND orchestrator.orchestrator_takes(e, r)
        UNION ALL
        -- A lane's own silence goes back to that lane, whatever the listener's filter says.
        SELECT e.id, r.name, r.version, e.data ->> 'lane', true
        FROM orchestrator.events e
        JOIN orchestrator.listener_rules r ON r.name = e.data ->> 'listener'
        JOIN orchestrator.listeners l ON l.name = r.name AND l.deleted_at IS NULL
        WHERE e.session_id = p_session AND e.id > p_from AND e.id <= p_through
          AND e.type = 'lane.idle' AND jsonb_typeof(e.data -> 'lane') = 'string'
          AND jsonb_typeof(e.data -> 'listener') = 'string'
          AND r.effective_at <= e.created_at
          AND (r.effective_until IS NULL OR e.created_at < r.effective_until))
    SELECT array_agg(ROW(m.event_id, m.name, m.lane, m.version, m.own)::orchestrator.orchestrator_hit
        ORDER BY m.name, m.lane, m.event_id)
        INTO v_hits FROM matched m;
    RETURN v_hits;
END
$$;
