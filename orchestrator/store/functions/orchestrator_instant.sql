-- The instant a `where` value names (`core/instants.instant_of`, the same pattern), or null: a commit time
-- compares with it as an instant, not as text. A value saved before values were checked may match the pattern and
-- still name no day (2026-02-30): null then, never an error in a routing round.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_instant(p_value jsonb)
RETURNS timestamptz LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF jsonb_typeof(p_value) <> 'string' OR (p_value #>> '{}') !~
        '^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-](0[0-9]|1[0-4]):[0-5][0-9])$' THEN
        RETURN NULL;
    END IF;
    RETURN (p_value #>> '{}')::timestamptz;
EXCEPTION WHEN data_exception THEN
    RETURN NULL;
END
$$;
