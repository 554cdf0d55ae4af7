-- Events in the application's own transactions (docs/transactions.md): `emit` and `emit_events`, which an
-- application calls in its own transaction, and captured tables, whose trigger appends an event for each row
-- changed. Either way the event commits or rolls back with the change, and the router sees it only once
-- committed. The functions carry the platform's schema as their search path, so they work from any caller's.

-- Appends the events (`[{type, data, client?, key?}]`) to the session, in order, all or none; answers their ids
-- (a key seen before answers the first event's). Each type must be declared and each `data` an object; the
-- type's JSON schema is checked by the caller (the platform's commands and Python helpers), not here.
CREATE FUNCTION emit_events(p_session text, p_events jsonb) RETURNS TABLE (event_id bigint)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF jsonb_typeof(p_events) = 'array' AND jsonb_array_length(p_events) > 10000 THEN
        RAISE EXCEPTION 'events: at most 10000 in one call, not %', jsonb_array_length(p_events)
            USING ERRCODE = '22023';
    END IF;
    RETURN QUERY SELECT e.event_id FROM orchestrator_emit_checked(p_session, p_events) e;
END
$$;

-- `emit_events` without its bound on one call: a captured statement's rows are as many as it changed.
CREATE FUNCTION orchestrator_emit_checked(p_session text, p_events jsonb) RETURNS TABLE (event_id bigint)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    v_lock text;
    v_bad record;
BEGIN
    IF p_events IS NULL OR jsonb_typeof(p_events) <> 'array' OR jsonb_array_length(p_events) = 0 THEN
        RAISE EXCEPTION 'events: a non-empty JSON array of {type, data} is required' USING ERRCODE = '22023';
    END IF;
    SELECT g.n - 1 AS i, g.x INTO v_bad
    FROM jsonb_array_elements(p_events) WITH ORDINALITY AS g(x, n)
    WHERE jsonb_typeof(g.x) <> 'object'
       OR jsonb_typeof(g.x -> 'type') IS DISTINCT FROM 'string'
       OR NOT EXISTS (SELECT 1 FROM event_types t WHERE t.name = g.x ->> 'type')
       OR jsonb_typeof(g.x -> 'data') IS DISTINCT FROM 'object'
       OR (g.x ? 'key' AND jsonb_typeof(g.x -> 'key') <> 'string')
       OR (g.x ? 'client' AND jsonb_typeof(g.x -> 'client') <> 'string')
    ORDER BY g.n LIMIT 1;
    IF FOUND THEN
        IF jsonb_typeof(v_bad.x) <> 'object' THEN
            RAISE EXCEPTION 'events.%: an object {type, data} is required', v_bad.i USING ERRCODE = '22023';
        ELSIF jsonb_typeof(v_bad.x -> 'type') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'events.%.type: a string is required', v_bad.i USING ERRCODE = '22023';
        ELSIF jsonb_typeof(v_bad.x -> 'data') IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION 'events.%.data: an object is required', v_bad.i USING ERRCODE = '22023';
        ELSIF v_bad.x ? 'key' AND jsonb_typeof(v_bad.x -> 'key') <> 'string' THEN
            RAISE EXCEPTION 'events.%.key: a string is required', v_bad.i USING ERRCODE = '22023';
        ELSIF v_bad.x ? 'client' AND jsonb_typeof(v_bad.x -> 'client') <> 'string' THEN
            RAISE EXCEPTION 'events.%.client: a string is required', v_bad.i USING ERRCODE = '22023';
        END IF;
        RAISE EXCEPTION 'events.%.type: % is not a declared event type', v_bad.i, v_bad.x -> 'type'
            USING ERRCODE = '22023';
    END IF;
    v_lock := orchestrator_lock_session(p_session);
    IF v_lock = 'not_found' THEN
        RAISE EXCEPTION 'session_id: no session %', quote_literal(coalesce(p_session, 'null'))
            USING ERRCODE = 'P0002';
    ELSIF v_lock <> 'ok' THEN
        RAISE EXCEPTION 'session_id: session % is not open', quote_literal(p_session) USING ERRCODE = '55000';
    END IF;
    RETURN QUERY SELECT e.o_event FROM orchestrator_emit(p_session, p_events, '{}', 0, NULL, NULL) e;
END
$$;

-- One event: `SELECT orchestrator.emit(session, 'ticket.escalated', '{"priority": 1}')`.
CREATE FUNCTION emit(p_session text, p_type text, p_data jsonb, p_key text DEFAULT NULL) RETURNS bigint
LANGUAGE sql SET search_path FROM CURRENT AS $$
    SELECT e.event_id FROM emit_events(
        p_session,
        jsonb_build_array(jsonb_build_object('type', p_type, 'data', p_data)
                          || CASE WHEN p_key IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('key', p_key) END)
    ) e
$$;

-- Tables whose changes are events (`capture_table`): one row per table, read by its trigger on every change.
CREATE TABLE captures (
    table_oid      oid PRIMARY KEY,
    table_name     text NOT NULL UNIQUE,
    type_prefix    text NOT NULL UNIQUE,
    id_column      text NOT NULL,
    session_column text,
    session_id     text,
    exclude        text[] NOT NULL DEFAULT '{}',
    saved_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK ((session_column IS NULL) <> (session_id IS NULL))
);

ALTER TABLE app_declarations DROP CONSTRAINT app_declarations_kind_check;
ALTER TABLE app_declarations ADD CONSTRAINT app_declarations_kind_check
    CHECK (kind IN ('event_type', 'listener', 'capture', 'schedule'));

-- A captured table's changed rows, a statement at a time (its transition tables): `<prefix>.created`, `.updated`
-- (with the columns whose value `changed` and those now null, `removed`) or `.deleted`, with `{_id, doc}`, the
-- columns left out not in it; one `emit_events` per session the rows name, sessions in order (two statements never
-- wait on each other's sessions crosswise). An update that changes nothing but columns left out is no event. A
-- row whose session column is null, or names no open session, fails the statement: its event would be lost.
CREATE FUNCTION orchestrator_captured() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    c captures%ROWTYPE;
    r record;
BEGIN
    SELECT * INTO c FROM captures WHERE table_oid = TG_RELID;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        FOR r IN
            SELECT coalesce(c.session_id, x.doc ->> c.session_column) AS session,
                   jsonb_agg(jsonb_build_object(
                       'type', c.type_prefix || '.created', 'client', 'table:' || c.table_name,
                       'data', jsonb_build_object('_id', x.doc -> c.id_column, 'doc', x.doc - c.exclude)
                   ) ORDER BY x.n) AS events
            FROM (SELECT to_jsonb(t) AS doc, row_number() OVER () AS n FROM new_rows t) x
            GROUP BY 1 ORDER BY 1
        LOOP
            PERFORM orchestrator_captured_emit(c, r.session, r.events);
        END LOOP;
    ELSIF TG_OP = 'DELETE' THEN
        FOR r IN
            SELECT coalesce(c.session_id, x.doc ->> c.session_column) AS session,
                   jsonb_agg(jsonb_build_object(
                       'type', c.type_prefix || '.deleted', 'client', 'table:' || c.table_name,
                       'data', jsonb_build_object('_id', x.doc -> c.id_column, 'doc', x.doc - c.exclude)
                   ) ORDER BY x.n) AS events
            FROM (SELECT to_jsonb(t) AS doc, row_number() OVER () AS n FROM old_rows t) x
            GROUP BY 1 ORDER BY 1
        LOOP
            PERFORM orchestrator_captured_emit(c, r.session, r.events);
        END LOOP;
    ELSE
        -- Old and new rows paired by their primary key: an update that changed the key is the old row's
        -- `.deleted` and the new one's `.created`, so whatever mirrors rows by `_id` keeps no ghost.
        FOR r IN
            WITH nw AS (SELECT to_jsonb(t) AS doc, row_number() OVER () AS n FROM new_rows t),
            od AS (SELECT to_jsonb(t) AS doc, row_number() OVER () AS n FROM old_rows t),
            changes AS (
                SELECT nw.n, nw.doc, CASE WHEN od.doc IS NULL THEN 'created' ELSE 'updated' END AS kind, d.changed,
                       d.removed
                FROM nw LEFT JOIN od ON od.doc -> c.id_column = nw.doc -> c.id_column
                CROSS JOIN LATERAL (
                    SELECT coalesce(jsonb_agg(k ORDER BY k) FILTER (WHERE jsonb_typeof(nw.doc -> k) <> 'null'), '[]')
                               AS changed,
                           coalesce(jsonb_agg(k ORDER BY k) FILTER (WHERE jsonb_typeof(nw.doc -> k) = 'null'), '[]')
                               AS removed
                    FROM jsonb_object_keys(nw.doc - c.exclude) k WHERE nw.doc -> k IS DISTINCT FROM od.doc -> k
                ) d
                WHERE od.doc IS NULL OR jsonb_array_length(d.changed) + jsonb_array_length(d.removed) > 0
                UNION ALL
                SELECT (SELECT count(*) FROM nw) + od.n, od.doc, 'deleted', NULL, NULL
                FROM od WHERE NOT EXISTS (SELECT 1 FROM nw WHERE nw.doc -> c.id_column = od.doc -> c.id_column)
            )
            SELECT coalesce(c.session_id, x.doc ->> c.session_column) AS session,
                   jsonb_agg(jsonb_build_object(
                       'type', c.type_prefix || '.' || x.kind, 'client', 'table:' || c.table_name,
                       'data', jsonb_build_object('_id', x.doc -> c.id_column, 'doc', x.doc - c.exclude)
                               || CASE WHEN x.kind = 'updated'
                                       THEN jsonb_build_object('changed', x.changed, 'removed', x.removed)
                                       ELSE '{}'::jsonb END
                   ) ORDER BY x.n) AS events
            FROM changes x
            GROUP BY 1 ORDER BY 1
        LOOP
            PERFORM orchestrator_captured_emit(c, r.session, r.events);
        END LOOP;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION orchestrator_captured_emit(c captures, p_session text, p_events jsonb) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF p_session IS NULL THEN
        RAISE EXCEPTION '%.%: a captured row needs a session', c.table_name, c.session_column
            USING ERRCODE = '23502';
    END IF;
    PERFORM orchestrator_emit_checked(p_session, p_events);
END
$$;

-- A captured table's rows leave through DELETE, which names each of them; TRUNCATE names none.
CREATE FUNCTION orchestrator_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%: a captured table is not truncated (its rows would leave no event); DELETE them, or end the capture first',
        TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME USING ERRCODE = '55000';
END
$$;

CREATE FUNCTION orchestrator_drop_capture_triggers(p_table regclass) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('DROP TRIGGER IF EXISTS orchestrator_capture_insert ON %s', p_table);
    EXECUTE format('DROP TRIGGER IF EXISTS orchestrator_capture_update ON %s', p_table);
    EXECUTE format('DROP TRIGGER IF EXISTS orchestrator_capture_delete ON %s', p_table);
    EXECUTE format('DROP TRIGGER IF EXISTS orchestrator_capture_truncate ON %s', p_table);
END
$$;

-- Declares a table's changes events: checks the table (one column its primary key, the session column and the
-- columns left out its own, not one of the platform's), records the capture and puts the trigger on it. Names
-- arrive as bound values and reach DDL only through format's %I and regclass's own quoting.
CREATE FUNCTION orchestrator_capture(
    p_table text, p_prefix text, p_session_column text, p_session text, p_exclude text[]
) RETURNS captures LANGUAGE plpgsql AS $$
DECLARE
    v_table regclass := to_regclass(p_table);
    v_id text;
    v_missing text;
    v_row captures%ROWTYPE;
BEGIN
    IF v_table IS NULL THEN
        RAISE EXCEPTION 'table: no table %', quote_literal(p_table) USING ERRCODE = '22023';
    END IF;
    IF (SELECT relkind FROM pg_class WHERE oid = v_table) <> 'r' THEN
        RAISE EXCEPTION 'table: % is not a plain table (a view, or partitioned: capture its partitions)',
            quote_literal(p_table) USING ERRCODE = '22023';
    END IF;
    -- A row written through a parent or a child of an inheritance skips the other's triggers.
    IF EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = v_table OR inhparent = v_table) THEN
        RAISE EXCEPTION 'table: % inherits or is inherited (a partition, or a parent): its rows can be written past '
            'its triggers', quote_literal(p_table) USING ERRCODE = '22023';
    END IF;
    IF (SELECT relnamespace FROM pg_class WHERE oid = v_table) = current_schema()::regnamespace THEN
        RAISE EXCEPTION 'table: % is one of the platform''s own', quote_literal(p_table) USING ERRCODE = '22023';
    END IF;
    SELECT min(a.attname::text) INTO v_id
    FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
    WHERE i.indrelid = v_table AND i.indisprimary
    HAVING count(*) = 1;
    IF v_id IS NULL THEN
        RAISE EXCEPTION 'table: % needs a primary key of one column (the events'' _id)', quote_literal(p_table)
            USING ERRCODE = '22023';
    END IF;
    SELECT c INTO v_missing FROM unnest(array_remove(ARRAY[p_session_column], NULL) || p_exclude) c
    WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = v_table AND a.attname = c
                      AND a.attnum > 0 AND NOT a.attisdropped)
    LIMIT 1;
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION '%: % has no column %',
            CASE WHEN v_missing = p_session_column THEN 'session_column' ELSE 'exclude' END,
            quote_literal(p_table), quote_literal(v_missing) USING ERRCODE = '22023';
    END IF;
    IF v_id = ANY(p_exclude) THEN
        RAISE EXCEPTION 'exclude: % is the primary key (the events'' _id)', quote_literal(v_id)
            USING ERRCODE = '22023';
    END IF;
    -- The captures of tables dropped since (an application's migration that drops and makes a table again).
    DELETE FROM captures c WHERE NOT EXISTS (SELECT 1 FROM pg_class k WHERE k.oid = c.table_oid);
    INSERT INTO captures (table_oid, table_name, type_prefix, id_column, session_column, session_id, exclude)
    VALUES (v_table, v_table::text, p_prefix, v_id, p_session_column, p_session, coalesce(p_exclude, '{}'))
    ON CONFLICT (table_oid) DO UPDATE SET table_name = EXCLUDED.table_name, type_prefix = EXCLUDED.type_prefix,
        id_column = EXCLUDED.id_column, session_column = EXCLUDED.session_column, session_id = EXCLUDED.session_id,
        exclude = EXCLUDED.exclude, saved_at = clock_timestamp()
    RETURNING * INTO v_row;
    PERFORM orchestrator_drop_capture_triggers(v_table);
    -- A trigger with transition tables takes one event each.
    EXECUTE format(
        'CREATE TRIGGER orchestrator_capture_insert AFTER INSERT ON %s REFERENCING NEW TABLE AS new_rows'
        ' FOR EACH STATEMENT EXECUTE FUNCTION %I.orchestrator_captured()', v_table, current_schema());
    EXECUTE format(
        'CREATE TRIGGER orchestrator_capture_update AFTER UPDATE ON %s'
        ' REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows'
        ' FOR EACH STATEMENT EXECUTE FUNCTION %I.orchestrator_captured()', v_table, current_schema());
    EXECUTE format(
        'CREATE TRIGGER orchestrator_capture_delete AFTER DELETE ON %s REFERENCING OLD TABLE AS old_rows'
        ' FOR EACH STATEMENT EXECUTE FUNCTION %I.orchestrator_captured()', v_table, current_schema());
    EXECUTE format(
        'CREATE TRIGGER orchestrator_capture_truncate BEFORE TRUNCATE ON %s'
        ' FOR EACH STATEMENT EXECUTE FUNCTION %I.orchestrator_refuse_truncate()', v_table, current_schema());
    RETURN v_row;
END
$$;

-- Ends a capture: its trigger goes, its events stay.
CREATE FUNCTION orchestrator_uncapture(p_table text) RETURNS captures LANGUAGE plpgsql AS $$
DECLARE
    v_row captures%ROWTYPE;
BEGIN
    -- By the table as it is now, or by the name it had when the table is gone.
    DELETE FROM captures c
    WHERE c.table_oid = to_regclass(p_table)
       OR (c.table_name = p_table AND NOT EXISTS (SELECT 1 FROM pg_class k WHERE k.oid = c.table_oid))
    RETURNING * INTO v_row;
    IF FOUND AND EXISTS (SELECT 1 FROM pg_class k WHERE k.oid = v_row.table_oid) THEN
        PERFORM orchestrator_drop_capture_triggers(v_row.table_oid::regclass);
    END IF;
    RETURN v_row;
END
$$;

-- A session deleted (by `delete_session` or retention) ends the captures into it alone, in the same transaction:
-- their tables' writes would be refused from then on.
CREATE FUNCTION orchestrator_session_captures_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM orchestrator_drop_capture_triggers(c.table_oid::regclass)
    FROM captures c WHERE c.session_id = NEW.id AND EXISTS (SELECT 1 FROM pg_class k WHERE k.oid = c.table_oid);
    DELETE FROM captures WHERE session_id = NEW.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER sessions_captures_end AFTER UPDATE OF status ON sessions
    FOR EACH ROW WHEN (NEW.status = 'deleting' AND OLD.status <> 'deleting')
    EXECUTE FUNCTION orchestrator_session_captures_end();
