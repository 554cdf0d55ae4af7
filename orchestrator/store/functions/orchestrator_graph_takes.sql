-- Whether a graph change's nodes offer a place an alias glob matches (`p_res`, the globs as regular
-- expressions): `orchestrator_takes`' test for an event with no alias.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_graph_takes(p_graph jsonb, p_res text[])
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT EXISTS (SELECT 1 FROM unnest(orchestrator.orchestrator_places(NULL, p_graph)) AS pl(place)
        WHERE pl.place ~ ANY (p_res))
$$;
