-- A captured table's changed row (its row-level triggers, `orchestrator_capture_triggers`): `<prefix>.created`,
-- `.updated` (with the columns whose value `changed` and those now null, `removed`) or `.deleted`, with `{_id,
-- doc}`, the columns left out not in it, staged for its session (`orchestrator_captured_emit`). An update that
-- changed the row's key, or moved it to another session, is the new row's `.created` and the old one's
-- `.deleted` (in the session each names), so whatever mirrors rows by `_id` keeps no ghost; one that changed
-- nothing but columns left out is no event. A row whose session is null, or names no open session, fails its
-- statement: its event would be lost. A row trigger, where a statement's trigger with transition tables was
-- (0033_captured_staged.sql): it costs a row its own work only, not a statement's query.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_row() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    c orchestrator.captures%ROWTYPE;
    v_new jsonb;
    v_old jsonb;
    v_client text;
    v_changed jsonb;
    v_removed jsonb;
BEGIN
    SELECT * INTO c FROM orchestrator.captures WHERE table_oid = TG_RELID;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    v_client := 'table:' || c.table_name;
    IF TG_OP <> 'DELETE' THEN
        v_new := to_jsonb(NEW);
    END IF;
    IF TG_OP <> 'INSERT' THEN
        v_old := to_jsonb(OLD);
    END IF;
    IF TG_OP = 'UPDATE' AND v_new -> c.id_column = v_old -> c.id_column
       AND (c.session_column IS NULL OR v_new -> c.session_column IS NOT DISTINCT FROM v_old -> c.session_column) THEN
        SELECT coalesce(jsonb_agg(k ORDER BY k) FILTER (WHERE jsonb_typeof(v_new -> k) <> 'null'), '[]'),
               coalesce(jsonb_agg(k ORDER BY k) FILTER (WHERE jsonb_typeof(v_new -> k) = 'null'), '[]')
            INTO v_changed, v_removed
        FROM jsonb_object_keys(v_new - c.exclude) k WHERE v_new -> k IS DISTINCT FROM v_old -> k;
        IF jsonb_array_length(v_changed) + jsonb_array_length(v_removed) > 0 THEN
            PERFORM orchestrator.orchestrator_captured_emit(c, coalesce(c.session_id, v_new ->> c.session_column),
                jsonb_build_array(jsonb_build_object('type', c.type_prefix || '.updated', 'client', v_client,
                    'data', jsonb_build_object('_id', v_new -> c.id_column, 'doc', v_new - c.exclude,
                                               'changed', v_changed, 'removed', v_removed))));
        END IF;
        RETURN NULL;
    END IF;
    IF v_new IS NOT NULL THEN
        PERFORM orchestrator.orchestrator_captured_emit(c, coalesce(c.session_id, v_new ->> c.session_column),
            jsonb_build_array(jsonb_build_object('type', c.type_prefix || '.created', 'client', v_client,
                'data', jsonb_build_object('_id', v_new -> c.id_column, 'doc', v_new - c.exclude))));
    END IF;
    IF v_old IS NOT NULL THEN
        PERFORM orchestrator.orchestrator_captured_emit(c, coalesce(c.session_id, v_old ->> c.session_column),
            jsonb_build_array(jsonb_build_object('type', c.type_prefix || '.deleted', 'client', v_client,
                'data', jsonb_build_object('_id', v_old -> c.id_column, 'doc', v_old - c.exclude))));
    END IF;
    RETURN NULL;
END
$$;
