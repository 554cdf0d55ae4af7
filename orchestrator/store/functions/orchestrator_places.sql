-- The places an alias glob is matched against (`core/filters.aliases_of`): the event's alias, or the ids of the
-- nodes a graph change names.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_places(p_alias text, p_graph jsonb)
RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN p_alias IS NOT NULL THEN ARRAY[p_alias]
        WHEN jsonb_typeof(p_graph -> 'nodes') = 'array'
            THEN ARRAY(SELECT x #>> '{}' FROM jsonb_array_elements(p_graph -> 'nodes') x
                WHERE jsonb_typeof(x) = 'string')
        ELSE '{}'::text[]
    END
$$;
