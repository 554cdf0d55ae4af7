-- A batch the lane took before, with its entries (by reference, each taken: no listener judges them) and the run
-- it started (or repeats).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_past_batch(b orchestrator.batches)
RETURNS json LANGUAGE sql STABLE AS $$
    SELECT orchestrator.orchestrator_past_batch_now(b, NULL::orchestrator.listener_rules)
$$;
