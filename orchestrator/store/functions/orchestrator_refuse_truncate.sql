-- A captured table's rows leave through DELETE, which names each of them; TRUNCATE names none.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION
        '%: a captured table is not truncated (its rows would leave no event); DELETE them, or end the capture first',
        TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME USING ERRCODE = '55000';
END
$$;
