-- Who did it (`core/events.actor_of`): the key of an outside request, the schedule of a firing, the database role
-- of the application's own transaction, else the listener and run of its source.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_actor(p_source jsonb, p_cause jsonb)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN jsonb_typeof(p_cause -> 'request') = 'object' AND p_cause -> 'request' -> 'key' IS NOT NULL
             AND jsonb_typeof(p_cause -> 'request' -> 'key') <> 'null'
            THEN jsonb_build_object('key', p_cause -> 'request' -> 'key')
        WHEN jsonb_typeof(p_cause -> 'schedule') = 'object' AND p_cause -> 'schedule' -> 'alias' IS NOT NULL
             AND jsonb_typeof(p_cause -> 'schedule' -> 'alias') <> 'null'
            THEN jsonb_build_object('schedule', p_cause -> 'schedule' -> 'alias')
        WHEN jsonb_typeof(p_cause -> 'transaction') = 'object' AND p_cause -> 'transaction' -> 'role' IS NOT NULL
             AND jsonb_typeof(p_cause -> 'transaction' -> 'role') <> 'null'
            THEN jsonb_build_object('role', p_cause -> 'transaction' -> 'role')
        ELSE nullif(jsonb_strip_nulls(jsonb_build_object(
            'listener', p_source -> 'listener', 'execution', p_source -> 'execution')), '{}'::jsonb)
    END
$$;
