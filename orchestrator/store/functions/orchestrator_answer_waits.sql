-- The open waits (and cancel watches) of a session that a routing round's page of events answers, answered: each event
-- finds the waits of its own session its probe keys reach (`wait_probes`, keyed as the listeners' probes are, at the
-- paths the session's waits probe by), their conditions decide (`orchestrator_condition_takes`; a run's own writes
-- never answer its waits, nor an event at or before a wait's position), and for each wait the first declared condition
-- that holds wins and takes its events in id order, up to `max_events` (`core/waits.answer`). Waits of one run open at
-- once are answered in the order they were put in place, and a later one never takes what an earlier one took in the
-- same round (as the look back leaves out what the run's earlier waits took). A session with no open wait costs one
-- index probe. Answers the waits answered, [{wait_id, execution_id, seq, kind, listener, matched,
-- event_ids}] (null: none): the round leaves a wait's events out of its run's listener's lanes, and the router tells
-- the runs.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_answer_waits(p_session text, p_from bigint, p_through bigint)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_paths text[];
    v_answer record;
    v_answers jsonb := '[]'::jsonb;
    -- The run whose waits the loop is at, what they took so far, the last wait answered (its later conditions pass).
    v_execution text;
    v_taken bigint[] := '{}';
    v_done bigint;
    v_ids bigint[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM orchestrator.run_waits w WHERE w.session_id = p_session AND w.state = 'open') THEN
        RETURN NULL;
    END IF;
    -- The paths this session's waits probe by (not the listeners'): a wait's value probe costs only its own
    -- session's rounds, where a listener's costs every session's.
    v_paths := ARRAY(SELECT DISTINCT p.eq_path FROM orchestrator.wait_probes p
                     WHERE p.session_id = p_session AND p.eq_path <> '' ORDER BY 1);
    FOR v_answer IN
        WITH found AS (
            SELECT DISTINCT p.wait_id, p.cond, e.id AS event_id
            FROM orchestrator.events e
            JOIN orchestrator.wait_probes p ON p.session_id = p_session
                 -- An event with no place, where no wait probes by a value, offers the one key of no value (0021).
                 AND p.probe_key = ANY (CASE WHEN e.alias IS NULL AND e.graph IS NULL AND cardinality(v_paths) = 0
                                             THEN ARRAY[chr(31) || chr(31) || 'null']
                                             ELSE orchestrator.orchestrator_event_keys(e, v_paths) END)
                 AND p.type_head = ANY (orchestrator.orchestrator_heads(e.type, '.'))
            WHERE e.session_id = p_session AND e.id > p_from AND e.id <= p_through),
        held AS (
            SELECT f.wait_id, f.cond, f.event_id, w.max_events, w.execution_id, w.kind
            FROM found f
            JOIN orchestrator.run_waits w ON w.id = f.wait_id AND w.state = 'open'
            JOIN orchestrator.wait_conditions k ON k.wait_id = f.wait_id AND k.cond = f.cond
            JOIN orchestrator.events e ON e.id = f.event_id
            WHERE e.id > w.after_id
              AND orchestrator.orchestrator_wait_hears_from(e, w)
              AND orchestrator.orchestrator_condition_takes(e, k, w.lane))
        SELECT h.wait_id, h.cond, h.execution_id, h.kind, min(h.max_events) AS max_events,
               array_agg(h.event_id ORDER BY h.event_id) AS ids
        FROM held h
        GROUP BY h.wait_id, h.cond, h.execution_id, h.kind
        ORDER BY h.execution_id, h.wait_id, h.cond
    LOOP
        IF v_answer.execution_id IS DISTINCT FROM v_execution THEN
            v_execution := v_answer.execution_id;
            v_taken := '{}';
        END IF;
        CONTINUE WHEN v_answer.wait_id = v_done;
        v_ids := v_answer.ids;
        IF v_answer.kind = 'wait' THEN
            v_ids := ARRAY(SELECT x FROM unnest(v_ids) x WHERE x <> ALL (v_taken) ORDER BY x);
        END IF;
        -- A condition whose events an earlier wait took holds no more: the next declared may.
        CONTINUE WHEN cardinality(v_ids) = 0;
        v_ids := v_ids[1:v_answer.max_events];
        -- Recorded, or the wait was closed meanwhile (its timeout, a give-up): then it took nothing, and a later
        -- wait of the run may take what it would have.
        IF orchestrator.orchestrator_wait_answered(v_answer.wait_id, v_answer.cond, v_ids, false, false) THEN
            v_done := v_answer.wait_id;
            IF v_answer.kind = 'wait' THEN
                v_taken := v_taken || v_ids;
            END IF;
            v_answers := v_answers || (
                SELECT jsonb_build_object('wait_id', w.id, 'session_id', w.session_id,
                                          'execution_id', w.execution_id, 'run_id', w.run_id,
                                          'seq', w.seq,
                                          'kind', w.kind, 'listener', w.listener, 'matched', w.matched,
                                          'event_ids', to_jsonb(w.event_ids))
                FROM orchestrator.run_waits w WHERE w.id = v_answer.wait_id);
        END IF;
    END LOOP;
    RETURN CASE WHEN jsonb_array_length(v_answers) > 0 THEN v_answers END;
END
$$;
