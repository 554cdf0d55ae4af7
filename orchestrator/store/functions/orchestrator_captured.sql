-- The statement triggers of a table captured before 0033_captured_staged.sql (capturing it again gives it row
-- triggers, `orchestrator_captured_row`): its changed rows, a statement at a time (its transition tables):
-- `<prefix>.created`, `.updated` (with the columns whose value `changed` and those now null, `removed`) or
-- `.deleted`, with `{_id, doc}`, the columns left out not in it; one `orchestrator_captured_emit` per session the
-- rows name (staged), sessions in order. An update that changes nothing but columns left out is no event. A
-- row whose session column is null, or names no open session, fails the statement: its event would be lost.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    c orchestrator.captures%ROWTYPE;
    r record;
BEGIN
    SELECT * INTO c FROM orchestrator.captures WHERE table_oid = TG_RELID;
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
            PERFORM orchestrator.orchestrator_captured_emit(c, r.session, r.events);
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
            PERFORM orchestrator.orchestrator_captured_emit(c, r.session, r.events);
        END LOOP;
    ELSE
        -- Old and new rows paired by their primary key and session: an update that changed the key is the old
        -- row's `.deleted` and the new one's `.created`, so whatever mirrors rows by `_id` keeps no ghost; so is
        -- one that moved the row to another session (`.deleted` in the one it left, `.created` where it went).
        FOR r IN
            WITH nw AS (SELECT to_jsonb(t) AS doc, row_number() OVER () AS n FROM new_rows t),
            od AS (SELECT to_jsonb(t) AS doc, row_number() OVER () AS n FROM old_rows t),
            changes AS (
                SELECT nw.n, nw.doc, CASE WHEN od.doc IS NULL THEN 'created' ELSE 'updated' END AS kind, d.changed,
                       d.removed
                FROM nw LEFT JOIN od ON od.doc -> c.id_column = nw.doc -> c.id_column
                    AND od.doc -> c.session_column IS NOT DISTINCT FROM nw.doc -> c.session_column
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
                FROM od WHERE NOT EXISTS (SELECT 1 FROM nw WHERE nw.doc -> c.id_column = od.doc -> c.id_column
                    AND nw.doc -> c.session_column IS NOT DISTINCT FROM od.doc -> c.session_column)
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
            PERFORM orchestrator.orchestrator_captured_emit(c, r.session, r.events);
        END LOOP;
    END IF;
    RETURN NULL;
END
$$;
