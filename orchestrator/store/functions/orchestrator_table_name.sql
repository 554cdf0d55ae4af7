-- A table as the platform names it in DDL and keeps it in `captures`: `schema.table`, each part quoted as needed
-- (format's %I), never regclass's text, which leaves out a schema the caller's search path holds.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_table_name(p_table regclass) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT format('%I.%I', n.nspname, k.relname)
    FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace WHERE k.oid = p_table
$$;
