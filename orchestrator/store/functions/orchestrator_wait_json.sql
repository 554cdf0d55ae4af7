-- A wait as its calls answer it: its id, state, the winning condition and the events it took.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_wait_json(w orchestrator.run_waits) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('id', w.id, 'seq', w.seq, 'kind', w.kind, 'state', w.state, 'matched', w.matched,
                              'event_ids', coalesce(to_jsonb(w.event_ids), '[]'::jsonb))
$$;
