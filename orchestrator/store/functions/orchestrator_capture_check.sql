-- What `orchestrator_capture` checks of a capture before it records it (the table a plain one, neither of the
-- platform's nor of PostgreSQL's catalogs, its primary key one immediate column, the session column there and of
-- a string type, the columns left out there and not the key); answers the key's column. Reads the catalogs only,
-- taking no lock on the table: an app's plan asks it at every start (`Captures.capture_refusal`).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_capture_check(
    p_table text, p_session_column text, p_exclude text[]
) RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_table regclass := to_regclass(p_table);
    v_schema text;
    v_id text;
    v_type record;
    v_missing text;
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
    SELECT n.nspname INTO v_schema
    FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace WHERE k.oid = v_table;
    IF (SELECT relnamespace FROM pg_class WHERE oid = v_table) = 'orchestrator'::regnamespace THEN
        RAISE EXCEPTION 'table: % is one of the platform''s own', quote_literal(p_table) USING ERRCODE = '22023';
    END IF;
    IF v_schema = 'information_schema' OR v_schema LIKE 'pg\_%' THEN
        RAISE EXCEPTION 'table: % is one of PostgreSQL''s own catalogs', quote_literal(p_table) USING ERRCODE = '22023';
    END IF;
    SELECT min(a.attname::text) INTO v_id
    FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
    WHERE i.indrelid = v_table AND i.indisprimary
    HAVING count(*) = 1;
    IF v_id IS NULL THEN
        RAISE EXCEPTION 'table: % needs a primary key of one column (the events'' _id)', quote_literal(p_table)
            USING ERRCODE = '22023';
    END IF;
    -- A row's events are made as the row changes (`orchestrator_captured_row`): a deferrable key lets one statement
    -- swap two rows' keys, which would read as rows deleted and made, not as the rows updated.
    IF EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = v_table AND i.indisprimary AND NOT i.indimmediate) THEN
        RAISE EXCEPTION 'table: % has a deferrable primary key (a statement could swap keys between rows); make it'
            ' not deferrable', quote_literal(p_table) USING ERRCODE = '22023';
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
    -- A session's id is text: a column of no string type (text, varchar, citext, a domain over one: their category
    -- is S) never holds one, and every row written would be refused.
    SELECT t.typcategory, format_type(a.atttypid, a.atttypmod) AS name INTO v_type
    FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid WHERE a.attrelid = v_table AND a.attname = p_session_column;
    IF p_session_column IS NOT NULL AND v_type.typcategory <> 'S' THEN
        RAISE EXCEPTION 'session_column: % is of type %, and a session''s id is text', quote_literal(p_session_column),
            v_type.name USING ERRCODE = '22023';
    END IF;
    IF v_id = ANY(p_exclude) THEN
        RAISE EXCEPTION 'exclude: % is the primary key (the events'' _id)', quote_literal(v_id)
            USING ERRCODE = '22023';
    END IF;
    RETURN v_id;
END
$$;
