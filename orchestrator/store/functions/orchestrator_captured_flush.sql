-- The path of captured events before 0033_captured_staged.sql (held in `captured_pending`, appended at the commit's
-- start), kept for the transactions of the release before that are in flight while this one starts; a later
-- migration drops it with the table.
-- The transaction's captured events still waiting for its commit, appended now, in the order of their
-- statements: what `emit_events` does before it appends, so that a transaction's events keep the order of its
-- statements. The first waiting row's id is the transaction's setting `orchestrator_captured.from_row` (set by
-- `orchestrator_captured_emit`, gone with the transaction); rows of other transactions are not visible to it.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_flush() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_from bigint := nullif(current_setting('orchestrator_captured.from_row', true), '')::bigint;
    v_id bigint;
BEGIN
    IF v_from IS NULL THEN
        RETURN;
    END IF;
    FOR v_id IN SELECT p.id FROM orchestrator.captured_pending p WHERE p.id >= v_from ORDER BY p.id LOOP
        PERFORM orchestrator.orchestrator_captured_take(v_id);
    END LOOP;
    PERFORM set_config('orchestrator_captured.from_row', '', true);
END
$$;
