-- A run's end, reported by the run itself or found by the router's sweep: its execution's end and
-- `execution.ended` (once: a second report answers `recorded: false`), then its slot held for the repeat
-- (`repeat_in` seconds) or released, a keyed listener's key slot handed to the longest waiter, a last failure's
-- `listener.failed`, and a draining session closed once nothing of it is left. Answers the lanes to drive now
-- (its own, when it has more waiting; the one a key slot went to). A failed run's `execution.ended` carries its
-- error: `execution.error` is `{type, message}`, the message cut at 2,000 characters, so a listener of failures
-- (an operator's inbox) can hand it on (`{{ event.execution.error }}`). A run cancelled because its `cancel_on`
-- heard an event (a `cancel` row of `run_waits` with that event) ends `cancelled`, the event its cause
-- (`cause.event`); any other cancellation is a stop (`stop_execution` letting it clean up, a row with its reason;
-- Temporal's cancel from outside, none) and ends `stopped`, as the data model's statuses say, its reason as its
-- error. A run asked to stop ends `stopped` whatever it reports, and is not repeated; one whose `cancel_on` heard
-- its event ends `cancelled` so. A `stopped` or `cancelled` end's `execution.error` is `{type: status, message}`
-- too. Its waits still open are abandoned. A recorded end answers the status and error recorded, which a stop or
-- a `cancel_on` may have decided over what was reported.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_run_end(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_execution text := p ->> 'execution_id';
    v_session text := p ->> 'session_id';
    v_listener text := p ->> 'listener';
    v_keyed boolean := coalesce((p ->> 'keyed')::boolean, false);
    v_status text := p ->> 'status';
    x orchestrator.executions%ROWTYPE;
    r orchestrator.lane_runs%ROWTYPE;
    v_drive jsonb := '[]';
    v_asked orchestrator.run_waits%ROWTYPE;
BEGIN
    -- Its `execution.ended` needs the session's lock: taken before the keys' (see orchestrator_keys_lock). A
    -- session being deleted takes its runs with it: nothing to record.
    IF orchestrator.orchestrator_lock_session(v_session) = 'not_found' THEN
        RETURN '{"recorded": false, "drive": []}';
    END IF;
    -- Its waits before the keys' lock, in the order a routing round takes them (it answers waits, then locks the
    -- keys of the lanes it queues for); a second report finds nothing left open.
    PERFORM orchestrator.orchestrator_waits_abandoned(v_execution);
    IF v_keyed THEN
        PERFORM orchestrator.orchestrator_keys_lock(v_session, v_listener);
    END IF;
    -- A run asked to cancel may end on its cancellation (its report says `cancelled`) or be terminated once its
    -- grace ran out (the sweep finds it `stopped`): either way the ask decides, so every path agrees.
    IF v_status IN ('cancelled', 'stopped') THEN
        SELECT * INTO v_asked FROM orchestrator.run_waits
            WHERE execution_id = v_execution AND kind = 'cancel' AND state = 'answered' ORDER BY ended_at LIMIT 1;
        v_status := CASE WHEN v_asked.event_ids[1] IS NOT NULL THEN 'cancelled' ELSE 'stopped' END;
    ELSE
        -- A run asked to stop ends `stopped` however it ended, not repeated: one that completed or failed before
        -- it heard the stop too (started after the stop was asked, it had nothing on Temporal to be told by).
        SELECT * INTO v_asked FROM orchestrator.run_waits WHERE execution_id = v_execution AND run_id = ''
            AND seq = -1;
        IF FOUND THEN
            v_status := 'stopped';
        ELSE
            -- So does a run whose `cancel_on` heard its event before its end was recorded: `cancelled` by it, not
            -- repeated, though it completed or failed before Temporal's cancellation reached it (a repeat's watch
            -- finds an event of its backoff as it is put in place, and a run that fails at once is not told first).
            SELECT * INTO v_asked FROM orchestrator.run_waits WHERE execution_id = v_execution AND run_id = ''
                AND seq = 0 AND kind = 'cancel' AND state = 'answered' AND event_ids[1] IS NOT NULL;
            IF FOUND THEN
                v_status := 'cancelled';
            END IF;
        END IF;
    END IF;
    UPDATE orchestrator.executions
        SET status = v_status, ended_at = clock_timestamp(),
            error = CASE WHEN v_asked.id IS NULL THEN p ->> 'error'
                         WHEN v_asked.reason IS NOT NULL THEN v_asked.reason
                         ELSE 'cancelled by event ' || v_asked.event_ids[1] END
        WHERE id = v_execution AND status = 'running' RETURNING * INTO x;
    IF NOT FOUND THEN
        RETURN '{"recorded": false, "drive": []}';
    END IF;
    PERFORM orchestrator.orchestrator_execution_started(v_execution);
    PERFORM orchestrator.orchestrator_append(
        x.session_id, 'execution.ended', NULL, NULL,
        jsonb_build_object('id', x.id, 'workflow', x.workflow, 'status', x.status)
            || CASE WHEN x.status = 'failed' AND x.error IS NOT NULL THEN jsonb_build_object('error',
                   jsonb_strip_nulls(jsonb_build_object('type', p ->> 'error_type', 'message', left(x.error, 2000))))
                WHEN x.status IN ('cancelled', 'stopped') AND x.error IS NOT NULL THEN jsonb_build_object('error',
                   jsonb_build_object('type', x.status, 'message', left(x.error, 2000)))
                ELSE '{}'::jsonb END,
        jsonb_strip_nulls(jsonb_build_object('listener', x.listener, 'execution', x.id)), x.depth, NULL, NULL, NULL,
        jsonb_build_object('execution', x.id)
            || CASE WHEN v_asked.event_ids[1] IS NOT NULL THEN jsonb_build_object('event', v_asked.event_ids[1])
                    ELSE '{}'::jsonb END);
    IF x.run_key IS NOT NULL THEN
        -- The lane's row before its run's, as a lane's record and a repeat's stop take them: a routing round holds
        -- it (FOR UPDATE) while it queues for the lane and asks whether its runs hold every slot. Without it the
        -- two crossed: the round saw this run's slot still held and left the lane to its end, and the end read
        -- the lane before the round committed and found nothing waiting, so the event waited for the stale-lane
        -- poll. Now one waits for the other: the round then sees the slot free, or the release sees the event.
        PERFORM 1 FROM orchestrator.lanes l JOIN orchestrator.lane_runs q ON q.lane_id = l.id
            WHERE q.run_key = x.run_key AND q.execution_id = v_execution FOR KEY SHARE OF l;
        SELECT * INTO r FROM orchestrator.lane_runs WHERE run_key = x.run_key AND execution_id = v_execution FOR UPDATE;
        IF FOUND THEN
            IF p ->> 'repeat_in' IS NOT NULL AND x.status NOT IN ('stopped', 'cancelled') THEN
                UPDATE orchestrator.lane_runs SET due_at = clock_timestamp() + make_interval(secs => (p ->>
                    'repeat_in')::float8)
                    WHERE run_key = r.run_key;
            ELSE
                v_drive := orchestrator.orchestrator_run_released(r, v_session, v_listener, v_keyed,
                                                                 (p ->> 'key_max')::integer);
                IF (p ->> 'gave_up')::boolean AND x.status NOT IN ('stopped', 'cancelled') THEN
                    PERFORM orchestrator.orchestrator_listener_failed(v_execution, v_listener, x.lane, x.depth);
                END IF;
            END IF;
        END IF;
    END IF;
    PERFORM orchestrator.orchestrator_close_drained(v_session);
    RETURN jsonb_build_object('recorded', true, 'drive', v_drive, 'status', x.status, 'error', x.error,
        'stopped', x.status IN ('stopped', 'cancelled') AND p ->> 'status' NOT IN ('cancelled', 'stopped'));
END
$$;
