-- The platform in a schema of its own (the runner made it and set it first in the search path), so it can share
-- a database with the application. A database made before moves in place: every table, sequence, function and
-- type the migrations before this one made in `public` goes to the platform's schema, with its rows, indexes,
-- triggers and grants. On a new database each already is there and nothing in `public` is touched (an
-- application's table of the same name stays its own).
DO $$
DECLARE
    v_target text := current_schema();
    v_name text;
    v_fn record;
BEGIN
    IF v_target = 'public' THEN
        RETURN;
    END IF;
    FOREACH v_name IN ARRAY ARRAY[
        'api_keys', 'app_declarations', 'batches', 'event_types', 'events', 'executions', 'graphs', 'key_passes',
        'key_slots', 'lane_events', 'lane_runs', 'lanes', 'listener_pauses', 'listener_probe_paths',
        'listener_probes', 'listener_rules', 'listener_switches', 'listener_versions', 'listeners', 'objects',
        'outcome_counts', 'outcomes', 'rate_buckets', 'replays', 'routing_cursors', 'schedule_runs', 'schedules',
        'session_retention', 'sessions', 'thread_items', 'worker_workflows'
    ] LOOP
        IF to_regclass(format('public.%I', v_name)) IS NOT NULL
           AND to_regclass(format('%I.%I', v_target, v_name)) IS NULL THEN
            EXECUTE format('ALTER TABLE public.%I SET SCHEMA %I', v_name, v_target);
        END IF;
    END LOOP;
    IF to_regclass('public.event_ids') IS NOT NULL AND to_regclass(format('%I.event_ids', v_target)) IS NULL THEN
        EXECUTE format('ALTER SEQUENCE public.event_ids SET SCHEMA %I', v_target);
    END IF;
    IF to_regtype('public.orchestrator_hit') IS NOT NULL
       AND to_regtype(format('%I.orchestrator_hit', v_target)) IS NULL THEN
        EXECUTE format('ALTER TYPE public.orchestrator_hit SET SCHEMA %I', v_target);
    END IF;
    FOR v_fn IN
        SELECT p.oid::regprocedure AS signature, p.proname FROM pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace
          AND (p.proname LIKE 'orchestrator\_%' OR p.proname IN ('notify_events', 'notify_listener'))
          AND NOT EXISTS (SELECT 1 FROM pg_proc q WHERE q.pronamespace = v_target::regnamespace
                          AND q.proname = p.proname)
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET SCHEMA %I', v_fn.signature, v_target);
    END LOOP;
END
$$;
