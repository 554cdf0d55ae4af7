-- A run's end answers the lane it frees a slot for as well (`orchestrator_run_end`, then the first lane to drive
-- read in the same statement), as a batch's finish answers its lane's next snapshot: the driver steps on it
-- with no read of its own. The run's own lane is read with `fetch_own` waiting events (0 when the driver holds
-- them, read ahead while the run ran), any other with `fetch`.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_run_end_read(p jsonb) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    v_end jsonb := orchestrator.orchestrator_run_end(p);
    d jsonb := v_end -> 'drive' -> 0;
BEGIN
    RETURN json_build_object(
        'recorded', v_end -> 'recorded',
        'stopped', v_end -> 'stopped',
        'status', v_end -> 'status',
        'error', v_end -> 'error',
        'drive', v_end -> 'drive',
        'snapshot', CASE WHEN d IS NOT NULL THEN orchestrator.orchestrator_lane_snapshot(
            d ->> 'session_id', d ->> 'listener', d ->> 'lane',
            CASE WHEN d ->> 'listener' = p ->> 'listener' AND d ->> 'lane' = p ->> 'lane'
                 THEN (p ->> 'fetch_own')::integer ELSE (p ->> 'fetch')::integer END) END);
END
$$;
