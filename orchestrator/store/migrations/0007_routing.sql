-- Routing as set operations: each listener version compiled once, when it is saved (`core/rules.py`), into rows
-- one static statement reads for every listener at once; a routing round is one call that reads a page of the
-- session's events, finds the listeners each could go to by index probes (the literal heads of their type and
-- alias globs, and the value of one `eq` condition), decides by the full checks, and queues them, with no
-- per-event work outside the database. The rules are derived data: a version saved before this migration is
-- compiled by the first process that starts on it (`store.postgres.compile_missing_rules`).

CREATE TABLE listener_rules (
    name            text NOT NULL,
    version         integer NOT NULL,
    effective_at    timestamptz NOT NULL,
    -- When a later version takes over: the least `effective_at` of the versions after it (null: none). An event
    -- is this version's when it committed in [effective_at, effective_until).
    effective_until timestamptz,
    type_res        text[],
    alias_res       text[],
    -- `where`: [{root, rest, op, value}], the path split at its first segment (the envelope field it reads).
    where_conds     jsonb NOT NULL DEFAULT '[]',
    key_root        text,
    key_rest        text[] NOT NULL DEFAULT '{}',
    key_segments    integer,
    -- `distinct_by`, split as the conditions' paths are (null: none).
    distinct_root   text,
    distinct_rest   text[] NOT NULL DEFAULT '{}',
    window_seconds  double precision NOT NULL,
    idle            boolean NOT NULL,
    -- As declared; the round caps both by the deployment's `listener_parallel_runs`.
    slots           integer,
    key_slots       integer,
    PRIMARY KEY (name, version),
    FOREIGN KEY (name, version) REFERENCES listener_versions (name, version) ON DELETE CASCADE
);

-- A probe: the head of a type, and in one text (`orchestrator_probe_key`) the head of an alias with a path and the
-- value there. An event's keys and type heads find its candidates in one index scan.
CREATE TABLE listener_probes (
    name      text NOT NULL,
    version   integer NOT NULL,
    probe_key text NOT NULL,
    type_head text NOT NULL,
    FOREIGN KEY (name, version) REFERENCES listener_rules (name, version) ON DELETE CASCADE
);
CREATE INDEX listener_probes_find ON listener_probes (probe_key, type_head);
CREATE INDEX listener_probes_rule ON listener_probes (name, version);

-- The paths some version probes by (few): where a round reads each event's value to probe with.
CREATE TABLE listener_probe_paths (
    path text PRIMARY KEY,
    root text NOT NULL,
    rest text[] NOT NULL
);

-- The version each queue row was routed by: a lane's step asks the listener as declared now again only of
-- events routed by another version (a re-save may have narrowed its filter).
ALTER TABLE lane_events ADD COLUMN version integer;
-- Queue rows are written a page at a time, and their lane always exists (the round creates it first); the
-- foreign key's check, one index probe and lock per row, was a third of a round's writing. A session's queue
-- rows are deleted when it is marked for deletion (0003_retention.sql), before its lanes go.
ALTER TABLE lane_events DROP CONSTRAINT lane_events_lane_id_fkey;

CREATE TYPE orchestrator_hit AS (event_id bigint, listener text, lane text, version integer, own boolean);

-- -- an event's values, as the envelope shows them (core/events.py, core/paths.py) ---------------------------

-- A commit time as the envelope writes it: UTC, microseconds only when there are any, and a `Z`.
CREATE FUNCTION orchestrator_created_text(p_at timestamptz) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
        || CASE WHEN extract(microseconds FROM p_at)::bigint % 1000000 = 0 THEN ''
                ELSE '.' || to_char(p_at AT TIME ZONE 'UTC', 'US') END || 'Z'
$$;

-- Who did it (`core/events.actor_of`): the key of an outside request, the schedule of a firing, else the
-- listener and run of its source.
CREATE FUNCTION orchestrator_actor(p_source jsonb, p_cause jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN jsonb_typeof(p_cause -> 'request') = 'object' AND p_cause -> 'request' -> 'key' IS NOT NULL
             AND jsonb_typeof(p_cause -> 'request' -> 'key') <> 'null'
            THEN jsonb_build_object('key', p_cause -> 'request' -> 'key')
        WHEN jsonb_typeof(p_cause -> 'schedule') = 'object' AND p_cause -> 'schedule' -> 'alias' IS NOT NULL
             AND jsonb_typeof(p_cause -> 'schedule' -> 'alias') <> 'null'
            THEN jsonb_build_object('schedule', p_cause -> 'schedule' -> 'alias')
        ELSE nullif(jsonb_strip_nulls(jsonb_build_object(
            'listener', p_source -> 'listener', 'execution', p_source -> 'execution')), '{}'::jsonb)
    END
$$;

-- A dotted path's rest inside a value (`core/paths.resolve`): an object's key, a list's index (digits only),
-- and a null anywhere is missing (SQL null).
CREATE FUNCTION orchestrator_walk(p_value jsonb, p_rest text[]) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v jsonb := p_value;
    v_segment text;
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        RETURN NULL;
    END IF;
    FOREACH v_segment IN ARRAY p_rest LOOP
        CASE jsonb_typeof(v)
            WHEN 'object' THEN
                v := v -> v_segment;
            WHEN 'array' THEN
                IF v_segment !~ '^[0-9]{1,9}$' THEN
                    RETURN NULL;
                END IF;
                v := v -> v_segment::integer;
            ELSE
                RETURN NULL;
        END CASE;
        IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
            RETURN NULL;
        END IF;
    END LOOP;
    RETURN v;
END
$$;

-- The value at a path in an event's envelope (`core/envelope_paths.resolve_in_event`): `root` the field it starts
-- in, `rest` the path below it. A thread item's `message` is its whole message, not the preview.
CREATE FUNCTION orchestrator_value(e events, p_root text, p_rest text[]) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    v jsonb;
    v_whole jsonb;
BEGIN
    CASE p_root
        WHEN 'id' THEN v := to_jsonb(e.id);
        WHEN 'session_id' THEN v := to_jsonb(e.session_id);
        WHEN 'type' THEN v := to_jsonb(e.type);
        WHEN 'alias' THEN v := to_jsonb(e.alias);
        WHEN 'depth' THEN v := to_jsonb(e.depth);
        WHEN 'created_at' THEN v := to_jsonb(orchestrator_created_text(e.created_at));
        WHEN 'execution' THEN v := e.execution;
        WHEN 'source' THEN v := e.source;
        WHEN 'data' THEN v := e.data;
        WHEN 'cause' THEN v := e.cause;
        WHEN 'graph' THEN v := e.graph;
        WHEN 'actor' THEN v := orchestrator_actor(e.source, e.cause);
        WHEN 'item' THEN
            v := e.item;
            IF v IS NOT NULL AND e.type = 'thread.item_posted' THEN
                SELECT coalesce(to_jsonb(t.message), t.message_json) INTO v_whole FROM thread_items t
                    WHERE t.session_id = e.session_id AND t.alias = e.alias AND t.id = e.item ->> 'id';
                IF v_whole IS NOT NULL THEN
                    v := jsonb_set(v, '{message}', v_whole);
                END IF;
            END IF;
        ELSE
            RETURN NULL;
    END CASE;
    RETURN orchestrator_walk(v, p_rest);
END
$$;

-- Whether one `where` condition holds on the value found (`core/filters.condition_holds`): a missing path (null)
-- never equals anything; values compare as JSON values; an order only between two numbers or two strings.
CREATE FUNCTION orchestrator_holds(p_found jsonb, p_op text, p_value jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN p_op = 'exists' THEN (p_found IS NOT NULL) = (p_value = 'true'::jsonb)
        WHEN p_found IS NULL THEN p_op IN ('neq', 'not_in')
        WHEN p_op = 'eq' THEN p_found = p_value
        WHEN p_op = 'neq' THEN p_found <> p_value
        WHEN p_op = 'in' THEN EXISTS (SELECT 1 FROM jsonb_array_elements(p_value) x WHERE x = p_found)
        WHEN p_op = 'not_in' THEN NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p_value) x WHERE x = p_found)
        WHEN jsonb_typeof(p_found) = 'number' AND jsonb_typeof(p_value) = 'number' THEN CASE p_op
            WHEN 'gt' THEN (p_found #>> '{}')::numeric > (p_value #>> '{}')::numeric
            WHEN 'gte' THEN (p_found #>> '{}')::numeric >= (p_value #>> '{}')::numeric
            WHEN 'lt' THEN (p_found #>> '{}')::numeric < (p_value #>> '{}')::numeric
            ELSE (p_found #>> '{}')::numeric <= (p_value #>> '{}')::numeric END
        WHEN jsonb_typeof(p_found) = 'string' AND jsonb_typeof(p_value) = 'string' THEN CASE p_op
            WHEN 'gt' THEN (p_found #>> '{}') COLLATE "C" > (p_value #>> '{}') COLLATE "C"
            WHEN 'gte' THEN (p_found #>> '{}') COLLATE "C" >= (p_value #>> '{}') COLLATE "C"
            WHEN 'lt' THEN (p_found #>> '{}') COLLATE "C" < (p_value #>> '{}') COLLATE "C"
            ELSE (p_found #>> '{}') COLLATE "C" <= (p_value #>> '{}') COLLATE "C" END
        ELSE false
    END
$$;

-- Whether a `where` item holds on an event: a condition ({root, rest, op, value}), or a group: `any` (one of its
-- items holds) or `not` (its item does not).
CREATE FUNCTION orchestrator_where_item(e events, c jsonb) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
    i jsonb;
BEGIN
    IF c ->> 'op' = 'any' THEN
        FOR i IN SELECT x FROM jsonb_array_elements(c -> 'items') x LOOP
            IF orchestrator_where_item(e, i) THEN
                RETURN true;
            END IF;
        END LOOP;
        RETURN false;
    ELSIF c ->> 'op' = 'not' THEN
        RETURN NOT orchestrator_where_item(e, c -> 'item');
    END IF;
    RETURN orchestrator_holds(
        orchestrator_value(e, c ->> 'root', ARRAY(SELECT jsonb_array_elements_text(c -> 'rest'))), c ->> 'op', c -> 'value');
END
$$;

-- Whether every `where` item of a rule holds on an event.
CREATE FUNCTION orchestrator_where_holds(e events, p_conds jsonb) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
    c jsonb;
BEGIN
    FOR c IN SELECT x FROM jsonb_array_elements(p_conds) x LOOP
        IF NOT orchestrator_where_item(e, c) THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$$;

-- A value's identity as text (`core/paths.canonical_json`): compact, keys sorted by code point, numbers in plain
-- notation with no trailing zeros.
CREATE FUNCTION orchestrator_canonical(p_value jsonb) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_text text;
BEGIN
    CASE jsonb_typeof(p_value)
        WHEN 'object' THEN
            SELECT '{' || coalesce(string_agg(to_jsonb(k)::text || ':' || orchestrator_canonical(x), ','
                                              ORDER BY k COLLATE "C"), '') || '}'
                INTO v_text FROM jsonb_each(p_value) AS j(k, x);
        WHEN 'array' THEN
            SELECT '[' || coalesce(string_agg(orchestrator_canonical(x), ',' ORDER BY n), '') || ']'
                INTO v_text FROM jsonb_array_elements(p_value) WITH ORDINALITY AS j(x, n);
        WHEN 'number' THEN
            v_text := trim_scale((p_value #>> '{}')::numeric)::text;
        ELSE
            v_text := p_value::text;
    END CASE;
    RETURN v_text;
END
$$;

-- A lane key from the value at the key path (`core/lane_keys.lane_key`): a string as it is (its first
-- `p_segments` alias segments, when set), anything else as its canonical text; null when the path is missing.
CREATE FUNCTION orchestrator_key_text(p_value jsonb, p_segments integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN p_value IS NULL THEN NULL
        WHEN jsonb_typeof(p_value) = 'string' AND p_segments IS NOT NULL
            THEN array_to_string((string_to_array(p_value #>> '{}', '/'))[1:p_segments], '/')
        WHEN jsonb_typeof(p_value) = 'string' THEN p_value #>> '{}'
        ELSE orchestrator_canonical(p_value)
    END
$$;

-- A lane's workflow id (`core/lane_keys.lane_workflow_id`): its key as it is when short and plain, else `#` and
-- a sha256 prefix.
CREATE FUNCTION orchestrator_lane_workflow_id(p_session text, p_listener text, p_key text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT 'lane:' || p_session || ':' || p_listener || ':' || CASE
        WHEN length(p_key) <= 100 AND p_key ~ '^[A-Za-z0-9_./:@~-]+$' THEN p_key
        ELSE '#' || left(encode(sha256(convert_to(p_key, 'UTF8')), 'hex'), 32) END
$$;

-- The places an alias glob is matched against (`core/filters.aliases_of`): the event's alias, or the ids of the
-- nodes a graph change names.
CREATE FUNCTION orchestrator_places(p_alias text, p_graph jsonb) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN p_alias IS NOT NULL THEN ARRAY[p_alias]
        WHEN jsonb_typeof(p_graph -> 'nodes') = 'array'
            THEN ARRAY(SELECT x #>> '{}' FROM jsonb_array_elements(p_graph -> 'nodes') x WHERE jsonb_typeof(x) = 'string')
        ELSE '{}'::text[]
    END
$$;

-- The heads a value offers a probe: '' and each run of its first segments ('a', 'a.b', 'a.b.c' for a type).
CREATE FUNCTION orchestrator_heads(p_value text, p_sep text) RETURNS text[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_heads text[] := ARRAY[''];
    v_head text;
    v_part text;
BEGIN
    IF p_value IS NULL THEN
        RETURN v_heads;
    END IF;
    FOREACH v_part IN ARRAY string_to_array(p_value, p_sep) LOOP
        v_head := CASE WHEN v_head IS NULL THEN v_part ELSE v_head || p_sep || v_part END;
        v_heads := v_heads || v_head;
    END LOOP;
    RETURN v_heads;
END
$$;

-- The alias heads an event offers: those of each of its places ('' always).
CREATE FUNCTION orchestrator_place_heads(p_alias text, p_graph jsonb) RETURNS text[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_heads text[] := ARRAY[''];
    v_place text;
BEGIN
    IF p_alias IS NOT NULL THEN
        RETURN orchestrator_heads(p_alias, '/');
    END IF;
    FOREACH v_place IN ARRAY orchestrator_places(p_alias, p_graph) LOOP
        v_heads := v_heads || (SELECT array_agg(h) FROM unnest(orchestrator_heads(v_place, '/')) h
                               WHERE h <> ALL (v_heads));
    END LOOP;
    RETURN v_heads;
END
$$;

-- Whether a listener version's filter takes an event (`core/filters.listener_accepts`): not its own doing, and
-- its types, places and `where` all hold. A lane's own silence is taken apart from this (route_page, 0008).
CREATE FUNCTION orchestrator_takes(e events, r listener_rules) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT (e.source ->> 'listener') IS DISTINCT FROM r.name
       AND (r.type_res IS NULL OR e.type ~ ANY (r.type_res))
       AND (r.alias_res IS NULL OR EXISTS (
             SELECT 1 FROM unnest(orchestrator_places(e.alias, e.graph)) AS pl(place) WHERE pl.place ~ ANY (r.alias_res)))
       AND (r.where_conds = '[]'::jsonb OR orchestrator_where_holds(e, r.where_conds))
$$;

-- A probe's key: the head of an alias, a path and the canonical text of the value there (equal JSON values, equal
-- text). Unit separators keep the parts apart: none of them can hold one.
CREATE FUNCTION orchestrator_probe_key(p_alias text, p_path text, p_value jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_alias || chr(31) || p_path || chr(31) || orchestrator_canonical(p_value)
$$;

-- Every probe key an event offers: each head of its places, times '' (no `eq` term) and its value at each path
-- some version probes by (`p_paths`, dotted). Its type's heads are the probe's other column.
CREATE FUNCTION orchestrator_event_keys(e events, p_paths text[]) RETURNS text[] LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_keys text[] := '{}';
    v_values text[] := ARRAY[chr(31) || 'null'];
    v_path text;
    v_parts text[];
    v_value jsonb;
    v_alias text;
BEGIN
    IF cardinality(p_paths) > 0 THEN
        FOREACH v_path IN ARRAY p_paths LOOP
            v_parts := string_to_array(v_path, '.');
            v_value := orchestrator_value(e, v_parts[1], v_parts[2:]);
            IF v_value IS NOT NULL THEN
                v_values := v_values || (v_path || chr(31) || orchestrator_canonical(v_value));
            END IF;
        END LOOP;
    END IF;
    FOREACH v_alias IN ARRAY orchestrator_place_heads(e.alias, e.graph) LOOP
        FOREACH v_path IN ARRAY v_values LOOP
            v_keys := v_keys || (v_alias || chr(31) || v_path);
        END LOOP;
    END LOOP;
    RETURN v_keys;
END
$$;

-- -- the round ---------------------------------------------------------------------------------------------

-- One routing round for a session: up to `p_limit` events after its position, matched against every listener
-- version in effect at their commit, queued into their lanes, and the position moved past them; in one call.
-- Only one round per session at a time: a round holds the session's position row (one that finds it held
-- answers `busy` and leaves it to the other). Answers the events read, the lanes that went from empty to
-- pending and need a nudge (with the version whose timing tells when), each lane's count of events queued (for
-- the metrics), and the traced events (for their spans). `p_cap` is the deployment's `listener_parallel_runs`.
CREATE FUNCTION orchestrator_route_page(p_session text, p_limit integer, p_cap integer) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_from bigint;
    v_through bigint;
    v_read integer;
    v_hits orchestrator_hit[];
    v_nudges jsonb;
    v_lanes jsonb;
    v_traced jsonb;
    v_paths text[] := ARRAY(SELECT path FROM listener_probe_paths ORDER BY path);
BEGIN
    PERFORM orchestrator_share_session(p_session);
    SELECT c.routed_event_id INTO v_from FROM routing_cursors c WHERE c.session_id = p_session FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('read', 0, 'busy', EXISTS (SELECT 1 FROM routing_cursors WHERE session_id = p_session));
    END IF;
    SELECT count(*), max(e.id) INTO v_read, v_through
        FROM (SELECT e.id FROM events e WHERE e.session_id = p_session AND e.id > v_from ORDER BY e.id LIMIT p_limit) e;
    IF v_read = 0 THEN
        RETURN jsonb_build_object('read', 0, 'busy', false);
    END IF;
    WITH candidates AS (
        SELECT DISTINCT e.id AS event_id, p.name, p.version
        FROM events e
        JOIN listener_probes p ON p.probe_key = ANY (orchestrator_event_keys(e, v_paths))
                               AND p.type_head = ANY (orchestrator_heads(e.type, '.'))
        WHERE e.session_id = p_session AND e.id > v_from AND e.id <= v_through),
    matched AS (
        SELECT e.id AS event_id, r.name, r.version,
               CASE WHEN r.key_root IS NULL THEN '_'
                    ELSE coalesce(orchestrator_key_text(orchestrator_value(e, r.key_root, r.key_rest), r.key_segments),
                                  '~') END AS lane,
               false AS own
        FROM candidates c
        JOIN events e ON e.id = c.event_id
        JOIN listener_rules r ON r.name = c.name AND r.version = c.version
        JOIN listeners l ON l.name = r.name AND l.deleted_at IS NULL
        WHERE r.effective_at <= e.created_at
          AND (r.effective_until IS NULL OR e.created_at < r.effective_until)
          AND NOT (e.type = 'lane.idle' AND jsonb_typeof(e.data -> 'lane') = 'string'
                   AND e.data ->> 'listener' = r.name)
          AND orchestrator_takes(e, r)
        UNION ALL
        -- A lane's own silence goes back to that lane, whatever the listener's filter says.
        SELECT e.id, r.name, r.version, e.data ->> 'lane', true
        FROM events e
        JOIN listener_rules r ON r.name = e.data ->> 'listener'
        JOIN listeners l ON l.name = r.name AND l.deleted_at IS NULL
        WHERE e.session_id = p_session AND e.id > v_from AND e.id <= v_through
          AND e.type = 'lane.idle' AND jsonb_typeof(e.data -> 'lane') = 'string'
          AND jsonb_typeof(e.data -> 'listener') = 'string'
          AND r.effective_at <= e.created_at
          AND (r.effective_until IS NULL OR e.created_at < r.effective_until))
    SELECT array_agg(ROW(m.event_id, m.name, m.lane, m.version, m.own)::orchestrator_hit ORDER BY m.name, m.lane, m.event_id)
        INTO v_hits FROM matched m;

    UPDATE routing_cursors SET routed_event_id = v_through WHERE session_id = p_session;
    -- The events written under a trace, each with how many lanes it went to: its span in that trace.
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', e.id, 'type', e.type, 'traceparent', e.traceparent,
                                                 'lanes', (SELECT count(*) FROM unnest(coalesce(v_hits, '{}')) h WHERE h.event_id = e.id))),
                    '[]'::jsonb)
        INTO v_traced FROM events e
        WHERE e.session_id = p_session AND e.id > v_from AND e.id <= v_through AND e.traceparent IS NOT NULL;

    IF v_hits IS NULL THEN
        RETURN jsonb_build_object('read', v_read, 'busy', false, 'now', extract(epoch FROM clock_timestamp()),
                                  'nudges', '[]'::jsonb, 'lanes', '[]'::jsonb, 'traced', v_traced);
    END IF;

    -- The keys' locks of the keyed listeners queued for (a lane may join the queue for a key slot), in order,
    -- then the lanes, created as needed, locked in (listener, lane) order: 0002_lanes.sql's lock order.
    PERFORM orchestrator_keys_lock(p_session, k.listener)
        FROM (SELECT DISTINCT h.listener FROM unnest(v_hits) h
              JOIN listener_rules r ON r.name = h.listener AND r.version = h.version
              WHERE r.key_slots IS NOT NULL ORDER BY 1) k;
    INSERT INTO lanes (session_id, listener, lane, workflow_id)
        SELECT p_session, k.listener, k.lane, orchestrator_lane_workflow_id(p_session, k.listener, k.lane)
        FROM (SELECT DISTINCT h.listener, h.lane FROM unnest(v_hits) h) k
        ON CONFLICT (session_id, listener, lane) DO NOTHING;

    WITH per_lane AS (
        SELECT h.listener, h.lane, max(h.version) AS version, max(h.event_id) AS through, count(*) AS events,
               max(h.event_id) FILTER (WHERE NOT h.own) AS newest_id
        FROM unnest(v_hits) h GROUP BY h.listener, h.lane),
    declared AS (
        SELECT p.*, r.window_seconds, least(r.slots, p_cap) AS run_slots, least(r.key_slots, p_cap) AS key_max,
               r.idle, (SELECT e.created_at FROM events e WHERE e.id = p.newest_id) AS newest_at
        FROM per_lane p JOIN listener_rules r ON r.name = p.listener AND r.version = p.version),
    locked AS (
        SELECT l.id, l.listener, l.lane, l.workflow_id, l.routed_through <= l.fired_through AS was_empty
        FROM lanes l JOIN declared d ON l.session_id = p_session AND l.listener = d.listener AND l.lane = d.lane
        ORDER BY l.listener, l.lane FOR UPDATE OF l)
    SELECT jsonb_agg(jsonb_build_object(
               'id', k.id, 'listener', d.listener, 'lane', d.lane, 'workflow_id', k.workflow_id,
               'version', d.version, 'through', d.through, 'events', d.events, 'newest_id', d.newest_id,
               'newest_at', d.newest_at, 'window_seconds', d.window_seconds, 'run_slots', d.run_slots,
               'key_max', d.key_max, 'idle', d.idle, 'was_empty', k.was_empty) ORDER BY d.listener, d.lane)
        INTO v_lanes
        FROM declared d JOIN locked k ON k.listener = d.listener AND k.lane = d.lane;

    INSERT INTO lane_events (lane_id, event_id, version)
        SELECT x.id, h.event_id, h.version
        FROM unnest(v_hits) h JOIN jsonb_to_recordset(v_lanes) AS x(id bigint, listener text, lane text)
          ON x.listener = h.listener AND x.lane = h.lane
        ON CONFLICT DO NOTHING;

    -- Whether each lane that was empty is blocked (its runs hold all its slots, or it waits in the queue for a
    -- key slot) or must now join that queue (keyed, every key slot taken): whoever frees the slot hands it on.
    WITH state AS (
        SELECT x, (x ->> 'id')::bigint AS id, (x ->> 'was_empty')::boolean AS was_empty,
               (x ->> 'run_slots' IS NOT NULL AND (SELECT count(*) FROM lane_runs r WHERE r.lane_id = (x ->> 'id')::bigint)
                                                   >= (x ->> 'run_slots')::integer)
               OR EXISTS (SELECT 1 FROM key_slots k WHERE k.lane_id = (x ->> 'id')::bigint AND NOT k.holding) AS blocked
        FROM jsonb_array_elements(v_lanes) x),
    queue AS (
        SELECT s.*, (s.was_empty AND NOT s.blocked AND s.x ->> 'key_max' IS NOT NULL
                     AND NOT EXISTS (SELECT 1 FROM key_slots k WHERE k.lane_id = s.id)
                     AND (SELECT count(*) FROM key_slots k WHERE k.session_id = p_session
                          AND k.listener = s.x ->> 'listener' AND k.holding) >= (s.x ->> 'key_max')::integer) AS joins
        FROM state s)
    SELECT jsonb_agg(q.x || jsonb_build_object('blocked', q.blocked OR q.joins, 'joins', q.joins) ORDER BY q.id)
        INTO v_lanes FROM queue q;

    UPDATE lanes l SET
        routed_through = greatest(l.routed_through, (x ->> 'through')::bigint),
        window_seconds = (x ->> 'window_seconds')::float8,
        run_slots = (x ->> 'run_slots')::integer,
        newest_id = CASE WHEN (x ->> 'newest_id')::bigint > l.newest_id THEN (x ->> 'newest_id')::bigint ELSE l.newest_id END,
        newest_at = CASE WHEN (x ->> 'newest_id')::bigint > l.newest_id THEN (x ->> 'newest_at')::timestamptz
                         ELSE l.newest_at END,
        nudged_at = CASE WHEN (x ->> 'was_empty')::boolean THEN clock_timestamp() ELSE l.nudged_at END
        FROM jsonb_array_elements(v_lanes) x WHERE l.id = (x ->> 'id')::bigint;
    PERFORM orchestrator_key_queue((x ->> 'id')::bigint, p_session, x ->> 'listener')
        FROM jsonb_array_elements(v_lanes) x WHERE (x ->> 'joins')::boolean ORDER BY (x ->> 'id')::bigint;

    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'listener', x ->> 'listener', 'lane', x ->> 'lane', 'workflow_id', x ->> 'workflow_id',
               'version', (x ->> 'version')::integer,
               'oldest_at', (SELECT extract(epoch FROM e.created_at) FROM lane_events w JOIN events e ON e.id = w.event_id
                             WHERE w.lane_id = l.id AND w.event_id > l.fired_through ORDER BY w.event_id LIMIT 1),
               'newest_at', extract(epoch FROM l.newest_at), 'newest_id', l.newest_id)), '[]'::jsonb)
        INTO v_nudges
        FROM jsonb_array_elements(v_lanes) x JOIN lanes l ON l.id = (x ->> 'id')::bigint
        WHERE (x ->> 'was_empty')::boolean AND (NOT (x ->> 'blocked')::boolean OR (x ->> 'idle')::boolean);

    RETURN jsonb_build_object(
        'read', v_read, 'busy', false, 'now', extract(epoch FROM clock_timestamp()), 'nudges', v_nudges,
        'lanes', (SELECT jsonb_agg(jsonb_build_object('listener', x ->> 'listener', 'lane', x ->> 'lane',
                                                      'events', (x ->> 'events')::integer))
                  FROM jsonb_array_elements(v_lanes) x),
        'traced', v_traced);
END
$$;

-- The round before it, whose matching was the router's, in Python, per event and per listener.
DROP FUNCTION orchestrator_route(jsonb);
