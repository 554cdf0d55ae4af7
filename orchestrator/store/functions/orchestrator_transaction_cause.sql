-- The cause of an event the application appends in its own transaction (`emit`, `emit_events`, a captured table's
-- change): no request of the platform's made it, so the database names who did: the role the transaction runs
-- as and, when the connection set one, its `application_name`. The end of `explain_event`'s chain back, and
-- the event's actor (`orchestrator_actor`: `{"role": ...}`).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_transaction_cause() RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('transaction', jsonb_strip_nulls(jsonb_build_object(
        'role', current_user::text,
        'application', nullif(current_setting('application_name', true), ''))))
$$;
