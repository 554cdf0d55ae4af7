-- The lanes: each listener's queues, batches and slots, and the engine's verbs on them, one statement each.
--
-- A lane has two watermarks: `routed_through` (the newest event the router queued for it) and `fired_through`
-- (the newest one its batches have taken). The router queues (`lane_events`) and moves `routed_through` in the
-- statement that saves its position; the lane step records a batch and moves `fired_through`. Both update the
-- lane's row, so a lane that goes from empty to pending is always seen by one of them: the router nudges it,
-- or the step's next snapshot finds it. A step decides from a snapshot taken without a lock and records its
-- decision only over the snapshot it read (`seq`), re-checking under the listener's advisory locks what other
-- lanes share (the throttle, key slots): a record that finds the lane moved on answers `stale`, and the driver
-- reads it again.
--
-- Lock order, in every function here: the session's row first (FOR NO KEY UPDATE where it appends an event,
-- FOR KEY SHARE otherwise: orchestrator_share_session), then the advisory locks (fires, then keys), then an
-- execution's row, then a lane's rows; the router holds its cursor and then lane rows, in their order. A
-- session's deletion takes the session's row FOR UPDATE before anything else (0003_retention.sql). No two
-- functions wait on each other in a cycle (tests/store/test_lock_order.py).

CREATE TABLE lanes (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id     text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    listener       text NOT NULL,
    lane           text NOT NULL,
    workflow_id    text NOT NULL,
    routed_through bigint NOT NULL DEFAULT 0,
    fired_through  bigint NOT NULL DEFAULT 0,
    -- The newest queued event that is not the lane's own `lane.idle`, and its commit: a debounce and the
    -- lane's silence count from it.
    newest_id      bigint NOT NULL DEFAULT 0,
    newest_at      timestamptz,
    -- As declared when the router last queued for the lane: its window (how long an unfired lane may look
    -- quiet before the router's poll nudges it again) and how many runs it may hold (null: a write action).
    window_seconds double precision NOT NULL DEFAULT 0,
    run_slots      integer,
    -- Moved by every batch the step records: what a record checks it read.
    seq            bigint NOT NULL DEFAULT 0,
    nudged_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (session_id, listener, lane)
);
CREATE INDEX lanes_unfired ON lanes (nudged_at) WHERE routed_through > fired_through;

-- When the router queued it: what `explain_event` and the crash suite read (commit to lane).
CREATE TABLE lane_events (
    lane_id   bigint NOT NULL REFERENCES lanes (id) ON DELETE CASCADE,
    event_id  bigint NOT NULL,
    queued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (lane_id, event_id)
);
-- Which lanes an event reached (what it caused, for `explain_event`).
CREATE INDEX lane_events_event ON lane_events (event_id);

-- Every batch a lane took (a repeat of a failed run is a batch of its own, with the same events): which
-- events it consumed and which it kept as entries (`distinct_by`), its verdict (null: act; else
-- `{"consumed": true}` or the outcome's status, reason and message), and whether it counts as a fire for the
-- throttle. A batch is `claimed` until its action is done; a driver that died in between leaves it for the
-- next, which acts on the same verdict. From `created_at` to `released_at` a batch whose run took a slot held
-- its lane. `run_key`: the run it started or repeats.
CREATE TABLE batches (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lane_id     bigint NOT NULL REFERENCES lanes (id) ON DELETE CASCADE,
    session_id  text NOT NULL,
    listener    text NOT NULL,
    first_id    bigint NOT NULL,
    last_id     bigint NOT NULL,
    event_ids   bigint[] NOT NULL,
    entry_ids   bigint[] NOT NULL,
    retry       integer NOT NULL DEFAULT 0,
    -- A batch asked for again (`replay_batch`, `redeliver`): the how-many-th, 0 for the lane's own.
    replay      integer NOT NULL DEFAULT 0,
    replay_of   bigint,
    state       text NOT NULL DEFAULT 'claimed' CHECK (state IN ('claimed', 'done')),
    verdict     jsonb,
    counted     boolean NOT NULL,
    run_key     text,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    released_at timestamptz,
    UNIQUE (lane_id, first_id, retry, replay)
);
CREATE INDEX batches_fires ON batches (session_id, listener, created_at) WHERE counted;
CREATE INDEX batches_claimed ON batches (lane_id) WHERE state = 'claimed';

-- A run's slot in its lane, from the batch that starts it to the record of its end, through the backoff of
-- its repeats (`due_at` set: failed, waiting for its repeat). `plan` is what a repeat needs to start again.
CREATE TABLE lane_runs (
    run_key      text PRIMARY KEY,
    lane_id      bigint NOT NULL REFERENCES lanes (id) ON DELETE CASCADE,
    batch_id     bigint NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
    execution_id text NOT NULL,
    retry        integer NOT NULL DEFAULT 0,
    due_at       timestamptz,
    plan         jsonb NOT NULL
);
CREATE INDEX lane_runs_lane ON lane_runs (lane_id);

-- Keyed listeners: at most max_parallel keys of one listener run at once in a session. A row per lane that
-- holds a slot or waits for one (oldest `since` first); whoever frees a slot hands it to the longest waiter
-- in the same statement, so a slot is never free while a lane waits for it.
-- A waiting lane's `due_at` is when its batch is due (its oldest waiting event's commit and its window): a freed
-- slot goes to the longest waiter whose batch is due, so no slot sits idle for a window still open while
-- another lane's batch is ready; when none is due, to the longest waiter.
CREATE TABLE key_slots (
    lane_id    bigint PRIMARY KEY REFERENCES lanes (id) ON DELETE CASCADE,
    session_id text NOT NULL,
    listener   text NOT NULL,
    holding    boolean NOT NULL,
    since      timestamptz NOT NULL DEFAULT clock_timestamp(),
    due_at     timestamptz
);
CREATE INDEX key_slots_listener ON key_slots (session_id, listener, holding, since);

-- Batches asked for again: `replay_batch` (a past batch's events, `replay_of` its first id) and `redeliver`
-- (a range of events, chunked by the listener's max_events). The lane step takes them, one at a time when a
-- slot is free, as batches of their own (`batches.replay`).
CREATE TABLE replays (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lane_id      bigint NOT NULL REFERENCES lanes (id) ON DELETE CASCADE,
    event_ids    bigint[] NOT NULL,
    replay_of    bigint,
    requested_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX replays_lane ON replays (lane_id, id);

-- -- reading ----------------------------------------------------------------------------------------------

-- An event as the engine reads it (a thread item's whole message, `p_whole`, beside the preview), with its
-- commit in epoch seconds. Plain `json`, as everything that carries events to the driver, and one expression
-- that PostgreSQL inlines into its caller: a lane reads up to a thousand at a time, and a `jsonb` built by a
-- function call per event cost ten times as much. Callers join the item's whole message (`orchestrator_whole`).
CREATE FUNCTION orchestrator_event_json(e events, p_whole jsonb) RETURNS json LANGUAGE sql STABLE AS $$
    SELECT json_build_object(
        'id', e.id, 'session_id', e.session_id, 'type', e.type, 'alias', e.alias, 'item', e.item,
        'execution', e.execution, 'source', e.source, 'depth', e.depth, 'data', e.data, 'cause', e.cause,
        'graph', e.graph, 'created_at', e.created_at, 'committed', extract(epoch FROM e.created_at),
        'traceparent', e.traceparent, 'whole_message', p_whole)
$$;

CREATE FUNCTION orchestrator_events_json(p_ids bigint[]) RETURNS json LANGUAGE sql STABLE AS $$
    SELECT coalesce(json_agg(orchestrator_event_json(e, coalesce(to_jsonb(t.message), t.message_json)) ORDER BY e.id),
                    '[]'::json)
    FROM events e
    LEFT JOIN thread_items t ON e.type = 'thread.item_posted' AND t.session_id = e.session_id AND t.alias = e.alias
                             AND t.id = e.item ->> 'id'
    WHERE e.id = ANY (p_ids)
$$;

CREATE FUNCTION orchestrator_batch_json(b batches) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', b.id, 'first_id', b.first_id, 'last_id', b.last_id, 'event_ids', to_jsonb(b.event_ids),
        'entry_ids', to_jsonb(b.entry_ids), 'retry', b.retry, 'replay', b.replay, 'replay_of', b.replay_of,
        'verdict', b.verdict, 'run_key', b.run_key)
$$;

CREATE FUNCTION orchestrator_run_json(r lane_runs) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'run_key', r.run_key, 'batch_id', r.batch_id, 'execution_id', r.execution_id, 'retry', r.retry,
        'due_at', extract(epoch FROM r.due_at), 'plan', r.plan,
        'since', (SELECT extract(epoch FROM b.created_at) FROM batches b WHERE b.id = r.batch_id))
$$;

-- A batch the lane took before, with its entries and the run it started (or repeats).
CREATE FUNCTION orchestrator_past_batch(b batches) RETURNS json LANGUAGE sql STABLE AS $$
    SELECT json_build_object(
        'batch', orchestrator_batch_json(b),
        'entries', orchestrator_events_json(b.entry_ids),
        'run', (SELECT orchestrator_run_json(r) FROM lane_runs r WHERE r.run_key = b.run_key))
$$;

-- The lane step's snapshot of a lane (`orchestrator.core.lane_snapshot.LaneSnapshot`), read without a lock:
-- the record of a decision checks it over `seq`. Null for a lane the router never queued for. `p_fetch` 0
-- reads no envelope (of waiting events or a replay): enough to know whether the lane waits, and for what.
CREATE FUNCTION orchestrator_lane_snapshot(p_session text, p_listener text, p_lane text, p_fetch integer)
RETURNS json LANGUAGE plpgsql STABLE AS $$
DECLARE
    l lanes%ROWTYPE;
    v_now timestamptz := clock_timestamp();
    v_listener jsonb;
    v_fetch integer := p_fetch;
BEGIN
    SELECT * INTO l FROM lanes WHERE session_id = p_session AND listener = p_listener AND lane = p_lane;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- The newest version in effect (one saved during the activation delay acts once it takes effect), or
    -- the newest saved when none is yet (its events cannot have been routed before it was).
    SELECT jsonb_build_object(
        'version', v.version, 'body', v.body,
        'switched_off', EXISTS (SELECT 1 FROM listener_switches w
                                WHERE w.session_id = p_session AND w.name = p_listener AND NOT w.enabled),
        'paused', EXISTS (SELECT 1 FROM listener_pauses p
                          WHERE p.name = p_listener AND (p.session_id IS NULL OR p.session_id = p_session)))
    INTO v_listener
    FROM listeners n JOIN listener_versions v ON v.name = n.name
    WHERE n.name = p_listener AND n.deleted_at IS NULL
    ORDER BY v.effective_at <= v_now DESC, v.version DESC LIMIT 1;
    -- Without `distinct_by` a batch takes at most `max_events` events: no more are read. A body keeps what was
    -- declared, so a default left out is the declaration's (`BatchSpec.max_events`, 100), as
    -- `lane_snapshot.fetch_limit` says.
    IF v_listener IS NOT NULL AND v_listener -> 'body' -> 'batch' ->> 'distinct_by' IS NULL THEN
        v_fetch := least(p_fetch, coalesce((v_listener -> 'body' -> 'batch' ->> 'max_events')::integer, 100));
    END IF;
    RETURN json_build_object(
        'lane', jsonb_build_object(
            'id', l.id, 'workflow_id', l.workflow_id, 'seq', l.seq, 'fired_through', l.fired_through,
            'routed_through', l.routed_through, 'newest_id', l.newest_id,
            'newest_at', extract(epoch FROM l.newest_at)),
        'now', extract(epoch FROM v_now),
        'session', (SELECT jsonb_build_object('status', s.status, 'alias', s.alias) FROM sessions s WHERE s.id = p_session),
        'listener', v_listener,
        'oldest_at', (SELECT extract(epoch FROM e.created_at) FROM lane_events q JOIN events e ON e.id = q.event_id
                      WHERE q.lane_id = l.id AND q.event_id > l.fired_through ORDER BY q.event_id LIMIT 1),
        'waiting', (
            SELECT coalesce(json_agg(orchestrator_event_json(e, coalesce(to_jsonb(t.message), t.message_json))
                                     ORDER BY e.id), '[]'::json)
            FROM (SELECT q.event_id FROM lane_events q WHERE q.lane_id = l.id AND q.event_id > l.fired_through
                  ORDER BY q.event_id LIMIT v_fetch) w
            JOIN events e ON e.id = w.event_id
            LEFT JOIN thread_items t ON e.type = 'thread.item_posted' AND t.session_id = e.session_id
                                     AND t.alias = e.alias AND t.id = e.item ->> 'id'),
        'runs', (SELECT coalesce(jsonb_agg(orchestrator_run_json(r) ORDER BY r.run_key), '[]')
                 FROM lane_runs r WHERE r.lane_id = l.id),
        'claimed', (SELECT orchestrator_past_batch(b) FROM batches b
                    WHERE b.lane_id = l.id AND b.state = 'claimed' ORDER BY b.id LIMIT 1),
        'repeat', (SELECT orchestrator_past_batch(b) FROM lane_runs r JOIN batches b ON b.id = r.batch_id
                   WHERE r.lane_id = l.id AND r.due_at IS NOT NULL ORDER BY r.due_at LIMIT 1),
        'replay', (
            SELECT json_build_object(
                'id', p.id, 'replay_of', p.replay_of,
                'events', CASE WHEN p_fetch > 0 THEN orchestrator_events_json(p.event_ids) ELSE '[]'::json END,
                'number', 1 + (SELECT coalesce(max(b.replay), 0) FROM batches b
                               WHERE b.lane_id = l.id AND b.first_id = (SELECT min(x) FROM unnest(p.event_ids) x)))
            FROM replays p WHERE p.lane_id = l.id ORDER BY p.id LIMIT 1),
        'key_slot', (SELECT CASE WHEN k.holding THEN 'held' ELSE 'queued' END FROM key_slots k WHERE k.lane_id = l.id),
        'keys_held', (SELECT count(*) FROM key_slots k
                      WHERE k.session_id = p_session AND k.listener = p_listener AND k.holding),
        'fires', (SELECT jsonb_build_object('count', count(*), 'oldest', extract(epoch FROM min(b.created_at)))
                  FROM batches b WHERE b.session_id = p_session AND b.listener = p_listener AND b.counted
                  AND b.created_at > v_now - interval '60 seconds'),
        'running', (SELECT count(*) FROM executions x WHERE x.session_id = p_session AND x.status = 'running'));
END
$$;

-- -- the keys' slots ----------------------------------------------------------------------------------------

-- A lane's address, as a driver is handed it.
CREATE FUNCTION orchestrator_lane_address(p_lane bigint) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('session_id', l.session_id, 'listener', l.listener, 'lane', l.lane,
                              'workflow_id', l.workflow_id)
    FROM lanes l WHERE l.id = p_lane
$$;

-- A lane gives its key slot back (or its place in the queue); `p_requeue`: it goes to the back of the queue
-- (it has more waiting). A free slot goes to the longest waiter, whose address is answered (none when every
-- slot is held, or nobody waits, or `p_max` is 0: its listener is gone). The caller holds the listener's keys
-- lock.
-- When a lane's waiting batch is due: its oldest waiting event's commit plus its window (as last declared).
CREATE FUNCTION orchestrator_lane_due(p_lane bigint) RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT e.created_at + make_interval(secs => l.window_seconds)
    FROM lanes l JOIN lane_events q ON q.lane_id = l.id JOIN events e ON e.id = q.event_id
    WHERE l.id = p_lane AND q.event_id > l.fired_through ORDER BY q.event_id LIMIT 1
$$;

-- A lane joins the back of the queue for a key slot (or keeps its place, if it has one).
CREATE FUNCTION orchestrator_key_queue(p_lane bigint, p_session text, p_listener text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO key_slots (lane_id, session_id, listener, holding, due_at)
        VALUES (p_lane, p_session, p_listener, false, orchestrator_lane_due(p_lane))
        ON CONFLICT (lane_id) DO NOTHING
$$;

CREATE FUNCTION orchestrator_key_slot_freed(p_lane bigint, p_session text, p_listener text, p_max integer,
                                            p_requeue boolean) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_granted bigint;
BEGIN
    DELETE FROM key_slots WHERE lane_id = p_lane;
    IF p_requeue THEN
        PERFORM orchestrator_key_queue(p_lane, p_session, p_listener);
    END IF;
    IF (SELECT count(*) FROM key_slots WHERE session_id = p_session AND listener = p_listener AND holding) >= p_max THEN
        RETURN '[]';
    END IF;
    UPDATE key_slots SET holding = true WHERE lane_id = (
        SELECT lane_id FROM key_slots WHERE session_id = p_session AND listener = p_listener AND NOT holding
        ORDER BY coalesce(due_at <= clock_timestamp(), false) DESC, since, lane_id LIMIT 1)
    RETURNING lane_id INTO v_granted;
    IF v_granted IS NULL THEN
        RETURN '[]';
    END IF;
    RETURN jsonb_build_array(orchestrator_lane_address(v_granted));
END
$$;

-- A keyed listener's lock on its key slots in a session. A function that also appends an event takes its
-- session's lock first: the session's lock is queued for behind the writers, and the keys' lock held through
-- that wait would hold every step of the listener up with it.
CREATE FUNCTION orchestrator_keys_lock(p_session text, p_listener text) RETURNS void LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(hashtext('keys:' || p_session || ':' || p_listener))
$$;

-- A keyed lane with a batch due and no key slot joins the queue for one, keeping its place if it has one; a
-- slot free meanwhile is its at once. Answers whether it holds one now.
CREATE FUNCTION orchestrator_queue_for_key_slot(p_lane bigint, p_session text, p_listener text, p_max integer)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM orchestrator_share_session(p_session);
    PERFORM orchestrator_keys_lock(p_session, p_listener);
    IF EXISTS (SELECT 1 FROM key_slots WHERE lane_id = p_lane AND holding) THEN
        RETURN true;
    END IF;
    IF (SELECT count(*) FROM key_slots WHERE session_id = p_session AND listener = p_listener AND holding) < p_max THEN
        INSERT INTO key_slots (lane_id, session_id, listener, holding) VALUES (p_lane, p_session, p_listener, true)
            ON CONFLICT (lane_id) DO UPDATE SET holding = true;
        RETURN true;
    END IF;
    PERFORM orchestrator_key_queue(p_lane, p_session, p_listener);
    RETURN false;
END
$$;

-- A lane gives back a key slot it holds with no run to use it on. Answers the lanes the slot went to.
CREATE FUNCTION orchestrator_give_back_key_slot(p_lane bigint, p_session text, p_listener text, p_max integer)
RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    PERFORM orchestrator_share_session(p_session);
    PERFORM orchestrator_keys_lock(p_session, p_listener);
    IF EXISTS (SELECT 1 FROM lane_runs WHERE lane_id = p_lane) THEN
        RETURN '[]';  -- a run took it meanwhile
    END IF;
    RETURN orchestrator_key_slot_freed(p_lane, p_session, p_listener, p_max, false);
END
$$;

-- -- writing ----------------------------------------------------------------------------------------------

-- `listener.failed` for a run that failed with no attempt left (once per run), from its execution's record.
CREATE FUNCTION orchestrator_listener_failed(p_execution text, p_listener text, p_lane text, p_depth integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    x executions%ROWTYPE;
BEGIN
    SELECT * INTO x FROM executions WHERE id = p_execution;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM orchestrator_append(
        x.session_id, 'listener.failed', NULL, NULL, NULL,
        jsonb_build_object('listener', p_listener, 'execution', p_execution), p_depth,
        jsonb_build_object(
            'listener', p_listener, 'lane', p_lane, 'first_id', x.batch -> 'first_id', 'last_id', x.batch -> 'last_id',
            'event_ids', x.batch -> 'event_ids', 'retry', x.batch -> 'retry', 'execution_id', p_execution,
            'error', x.error),
        'failed:' || p_execution, NULL, jsonb_build_object('execution', p_execution));
END
$$;

-- `execution.started` for a run, once (with its end, if that is recorded first). The session's lock comes
-- before the execution's row, in the order a run's end takes them: the other order deadlocks with a run that
-- ends while its start is being recorded. The caller may hold the session's lock already.
CREATE FUNCTION orchestrator_execution_started(p_execution text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    x executions%ROWTYPE;
    v_event bigint;
BEGIN
    PERFORM orchestrator_lock_session(e.session_id) FROM executions e WHERE e.id = p_execution;
    SELECT * INTO x FROM executions WHERE id = p_execution FOR UPDATE;
    IF NOT FOUND OR x.started_event_id IS NOT NULL THEN
        RETURN;
    END IF;
    v_event := orchestrator_append(
        x.session_id, 'execution.started', NULL, NULL,
        jsonb_build_object('id', x.id, 'workflow', x.workflow, 'status', 'running'),
        jsonb_strip_nulls(jsonb_build_object('listener', x.listener, 'execution', x.id)), x.depth, NULL, NULL, NULL,
        x.cause);
    UPDATE executions SET started_event_id = v_event WHERE id = p_execution;
END
$$;

-- The record of a step's `Take`: a batch, the run it starts and the slots it takes, over the snapshot it was
-- decided from. Answers `{"stale": why}` when the lane moved on (`seq`), the listener was paused, the throttle
-- or every key slot was taken meanwhile; else the batch's id and the lanes a key slot it gave back went to.
CREATE FUNCTION orchestrator_lane_record(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_lane bigint := (p ->> 'lane_id')::bigint;
    v_session text := p ->> 'session_id';
    v_listener text := p ->> 'listener';
    b jsonb := p -> 'batch';
    r jsonb := p -> 'run';
    v_key text := p ->> 'key_slot';
    v_max integer := coalesce((p ->> 'key_max')::integer, 0);
    v_batch bigint;
    v_granted jsonb := '[]';
BEGIN
    PERFORM orchestrator_share_session(v_session);
    IF (b ->> 'counted')::boolean THEN
        PERFORM pg_advisory_xact_lock(hashtext('fires:' || v_session || ':' || v_listener));
        IF (SELECT count(*) FROM batches WHERE session_id = v_session AND listener = v_listener AND counted
            AND created_at > clock_timestamp() - interval '60 seconds') >= (p ->> 'fires_limit')::integer THEN
            RETURN '{"stale": "throttle"}';
        END IF;
    END IF;
    IF v_key IN ('take', 'give_back') THEN
        PERFORM orchestrator_keys_lock(v_session, v_listener);
    END IF;
    IF v_key = 'take' AND NOT EXISTS (SELECT 1 FROM key_slots WHERE lane_id = v_lane AND holding)
       AND (SELECT count(*) FROM key_slots WHERE session_id = v_session AND listener = v_listener AND holding) >= v_max THEN
        RETURN '{"stale": "key_slot"}';
    END IF;
    IF EXISTS (SELECT 1 FROM listener_pauses WHERE name = v_listener AND (session_id IS NULL OR session_id = v_session)) THEN
        RETURN '{"stale": "paused"}';
    END IF;
    UPDATE lanes SET seq = seq + 1,
        fired_through = CASE WHEN p ->> 'kind' = 'batch' THEN greatest(fired_through, (b ->> 'last_id')::bigint)
                             ELSE fired_through END
        WHERE id = v_lane AND seq = (p ->> 'seq')::bigint;
    IF NOT FOUND THEN
        RETURN '{"stale": "seq"}';
    END IF;
    IF v_key = 'take' THEN
        INSERT INTO key_slots (lane_id, session_id, listener, holding) VALUES (v_lane, v_session, v_listener, true)
            ON CONFLICT (lane_id) DO UPDATE SET holding = true;
    END IF;
    INSERT INTO batches (lane_id, session_id, listener, first_id, last_id, event_ids, entry_ids, retry, replay,
                         replay_of, verdict, counted, run_key)
        VALUES (v_lane, v_session, v_listener, (b ->> 'first_id')::bigint, (b ->> 'last_id')::bigint,
                ARRAY(SELECT jsonb_array_elements_text(b -> 'event_ids')::bigint),
                ARRAY(SELECT jsonb_array_elements_text(b -> 'entry_ids')::bigint),
                (b ->> 'retry')::integer, (b ->> 'replay')::integer, (b ->> 'replay_of')::bigint,
                CASE WHEN jsonb_typeof(b -> 'verdict') = 'object' THEN b -> 'verdict' END,
                (b ->> 'counted')::boolean, b ->> 'run_key')
        RETURNING id INTO v_batch;
    IF p ->> 'kind' = 'replay' THEN
        DELETE FROM replays WHERE id = (p ->> 'replay_id')::bigint;
    END IF;
    IF jsonb_typeof(r) = 'object' THEN
        IF p ->> 'kind' = 'repeat' THEN
            UPDATE lane_runs SET execution_id = r ->> 'execution_id', retry = (r ->> 'retry')::integer, due_at = NULL
                WHERE run_key = r ->> 'run_key';
        ELSE
            INSERT INTO lane_runs (run_key, lane_id, batch_id, execution_id, retry, plan)
                VALUES (r ->> 'run_key', v_lane, v_batch, r ->> 'execution_id', 0, r -> 'plan');
        END IF;
        INSERT INTO executions (id, session_id, workflow, listener, lane, batch, run_key, depth, cause)
            VALUES (r ->> 'execution_id', v_session, r ->> 'workflow', v_listener, p ->> 'lane', r -> 'batch',
                    r ->> 'run_key', (r ->> 'depth')::integer, r -> 'cause')
            ON CONFLICT (id) DO NOTHING;
    ELSIF p ->> 'kind' = 'repeat' THEN
        -- A repeat stopped by a guard: the failed run's slot goes with it.
        WITH gone AS (DELETE FROM lane_runs WHERE run_key = b ->> 'run_key' RETURNING batch_id)
            UPDATE batches SET released_at = clock_timestamp() FROM gone WHERE batches.id = gone.batch_id;
    END IF;
    IF v_key = 'give_back' THEN
        v_granted := orchestrator_key_slot_freed(v_lane, v_session, v_listener, v_max,
            EXISTS (SELECT 1 FROM lanes WHERE id = v_lane AND routed_through > fired_through));
    END IF;
    RETURN jsonb_build_object('batch_id', v_batch, 'granted', v_granted);
END
$$;

-- A batch acted on: marked done; a slot held for a run that did not start given back (a keyed listener's key
-- slot handed on); the run's `execution.started`; the outcome (once per batch) and its count; the receipt;
-- and `listener.failed` for a repeat stopped by a guard. Answers the lanes a freed key slot went to, and the
-- lane's next snapshot (one round trip for the end of a batch and the start of the next step).
CREATE FUNCTION orchestrator_batch_finish(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_lane bigint := (p ->> 'lane_id')::bigint;
    v_session text := p ->> 'session_id';
    v_listener text := p ->> 'listener';
    o jsonb := p -> 'outcome';
    c jsonb := p -> 'receipt';
    v_granted jsonb := '[]';
    v_inserted bigint;
    v_released text;
BEGIN
    -- The session's row first: locked where this appends an event (before the keys' lock, see
    -- orchestrator_keys_lock, and the execution's row, see orchestrator_execution_started), else shared.
    IF (p ->> 'started')::boolean OR jsonb_typeof(c) = 'object' OR p ->> 'failed_execution' IS NOT NULL THEN
        PERFORM orchestrator_lock_session(v_session);
    ELSE
        PERFORM orchestrator_share_session(v_session);
    END IF;
    IF (p ->> 'release')::boolean AND (p ->> 'keyed')::boolean THEN
        PERFORM orchestrator_keys_lock(v_session, v_listener);
    END IF;
    IF (p ->> 'release')::boolean THEN
        -- The execution's row before the batch's and the slot's, as a run's end takes them.
        PERFORM 1 FROM executions WHERE id = p ->> 'execution_id' FOR UPDATE;
    END IF;
    IF (p ->> 'started')::boolean THEN
        PERFORM orchestrator_execution_started(p ->> 'execution_id');
    END IF;
    UPDATE batches SET state = 'done' WHERE id = (p ->> 'batch_id')::bigint AND state = 'claimed';
    IF (p ->> 'release')::boolean THEN
        -- No run took the slot held for it (its start was refused): the lane is free for what it left behind.
        WITH gone AS (DELETE FROM lane_runs WHERE run_key = p ->> 'run_key' AND execution_id = p ->> 'execution_id'
                      RETURNING batch_id, run_key)
            UPDATE batches SET released_at = clock_timestamp() FROM gone WHERE batches.id = gone.batch_id
            RETURNING gone.run_key INTO v_released;
        -- It never ran: no execution to list or to count as running.
        DELETE FROM executions WHERE id = p ->> 'execution_id' AND status = 'running' AND started_event_id IS NULL;
        IF v_released IS NOT NULL AND (p ->> 'keyed')::boolean THEN
            v_granted := orchestrator_key_slot_freed(v_lane, v_session, v_listener, (p ->> 'key_max')::integer,
                EXISTS (SELECT 1 FROM lanes WHERE id = v_lane AND routed_through > fired_through));
        END IF;
    END IF;
    IF jsonb_typeof(o) = 'object' THEN
        INSERT INTO outcomes (session_id, listener, version, lane, status, reason, first_id, last_id, event_ids, retry,
                              execution_id, message, batch_key)
            VALUES (v_session, v_listener, (o ->> 'version')::integer, p ->> 'lane', o ->> 'status', o ->> 'reason',
                    (o ->> 'first_id')::bigint, (o ->> 'last_id')::bigint,
                    ARRAY(SELECT jsonb_array_elements_text(o -> 'event_ids')::bigint), (o ->> 'retry')::integer,
                    o ->> 'execution_id', o ->> 'message', o ->> 'batch_key')
            ON CONFLICT (session_id, listener, batch_key) DO NOTHING RETURNING id INTO v_inserted;
        IF v_inserted IS NOT NULL THEN
            INSERT INTO outcome_counts (session_id, listener, status, count) VALUES (v_session, v_listener, o ->> 'status', 1)
                ON CONFLICT (session_id, listener, status) DO UPDATE SET count = outcome_counts.count + 1;
        END IF;
    END IF;
    IF jsonb_typeof(c) = 'object' THEN
        -- A closed session takes no more thread items: the outcome is kept, the receipt left out.
        PERFORM orchestrator_post_thread_item(
            v_session, c ->> 'alias', c ->> 'id', c ->> 'type', c ->> 'role', c ->> 'message', NULL, c ->> 'preview',
            c -> 'metadata', jsonb_build_object('listener', v_listener), (c ->> 'depth')::integer, c ->> 'key', NULL,
            c -> 'cause');
    END IF;
    IF p ->> 'failed_execution' IS NOT NULL THEN
        PERFORM orchestrator_listener_failed(p ->> 'failed_execution', v_listener, p ->> 'lane', (p ->> 'depth')::integer);
    END IF;
    RETURN jsonb_build_object(
        'granted', v_granted,
        'outcome_new', v_inserted IS NOT NULL,
        'snapshot', orchestrator_lane_snapshot(v_session, v_listener, p ->> 'lane', (p ->> 'fetch')::integer));
END
$$;

-- A run's end, reported by the run itself or found by the router's sweep: its execution's end and
-- `execution.ended` (once: a second report answers `recorded: false`), then its slot held for the repeat
-- (`repeat_in` seconds) or released, a keyed listener's key slot handed to the longest waiter, a last failure's
-- `listener.failed`, and a draining session closed once nothing of it is left. Answers the lanes to drive now
-- (its own, when it has more waiting; the one a key slot went to).
CREATE FUNCTION orchestrator_run_end(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_execution text := p ->> 'execution_id';
    v_session text := p ->> 'session_id';
    v_listener text := p ->> 'listener';
    v_keyed boolean := coalesce((p ->> 'keyed')::boolean, false);
    x executions%ROWTYPE;
    r lane_runs%ROWTYPE;
    v_drive jsonb := '[]';
    v_waiting boolean;
BEGIN
    -- Its `execution.ended` needs the session's lock: taken before the keys' (see orchestrator_keys_lock). A
    -- session being deleted takes its runs with it: nothing to record.
    IF orchestrator_lock_session(v_session) = 'not_found' THEN
        RETURN '{"recorded": false, "drive": []}';
    END IF;
    IF v_keyed THEN
        PERFORM orchestrator_keys_lock(v_session, v_listener);
    END IF;
    UPDATE executions SET status = p ->> 'status', error = p ->> 'error', ended_at = clock_timestamp()
        WHERE id = v_execution AND status = 'running' RETURNING * INTO x;
    IF NOT FOUND THEN
        RETURN '{"recorded": false, "drive": []}';
    END IF;
    PERFORM orchestrator_execution_started(v_execution);
    PERFORM orchestrator_append(
        x.session_id, 'execution.ended', NULL, NULL,
        jsonb_build_object('id', x.id, 'workflow', x.workflow, 'status', x.status),
        jsonb_strip_nulls(jsonb_build_object('listener', x.listener, 'execution', x.id)), x.depth, NULL, NULL, NULL,
        jsonb_build_object('execution', x.id));
    IF x.run_key IS NOT NULL THEN
        SELECT * INTO r FROM lane_runs WHERE run_key = x.run_key AND execution_id = v_execution FOR UPDATE;
        IF FOUND THEN
            IF p ->> 'repeat_in' IS NOT NULL THEN
                UPDATE lane_runs SET due_at = clock_timestamp() + make_interval(secs => (p ->> 'repeat_in')::float8)
                    WHERE run_key = r.run_key;
            ELSE
                DELETE FROM lane_runs WHERE run_key = r.run_key;
                UPDATE batches SET released_at = clock_timestamp() WHERE id = r.batch_id;
                v_waiting := EXISTS (SELECT 1 FROM lanes WHERE id = r.lane_id AND routed_through > fired_through)
                          OR EXISTS (SELECT 1 FROM replays WHERE lane_id = r.lane_id);
                IF v_keyed THEN
                    v_drive := orchestrator_key_slot_freed(r.lane_id, v_session, v_listener,
                                                           (p ->> 'key_max')::integer, v_waiting);
                ELSIF v_waiting THEN
                    v_drive := jsonb_build_array(orchestrator_lane_address(r.lane_id));
                END IF;
                IF (p ->> 'gave_up')::boolean THEN
                    PERFORM orchestrator_listener_failed(v_execution, v_listener, x.lane, x.depth);
                END IF;
            END IF;
        END IF;
    END IF;
    PERFORM orchestrator_close_drained(v_session);
    RETURN jsonb_build_object('recorded', true, 'drive', v_drive);
END
$$;

-- Close a draining session (one, or all: null) once its pending has all fired and its runs have ended: routed
-- past the drain point, no lane with an event at or before it unfired, no batch of it unfinished, no run of
-- such a batch holding a slot. Answers the sessions closed.
CREATE FUNCTION orchestrator_close_drained(p_session text) RETURNS SETOF text LANGUAGE sql AS $$
    UPDATE sessions s SET status = 'closed', closed_at = clock_timestamp(), drain_through = NULL
    WHERE s.drain_through IS NOT NULL AND s.status = 'open' AND (p_session IS NULL OR s.id = p_session)
      AND (SELECT c.routed_event_id FROM routing_cursors c WHERE c.session_id = s.id) >= s.drain_through
      AND NOT EXISTS (SELECT 1 FROM lanes l JOIN lane_events q ON q.lane_id = l.id
                      WHERE l.session_id = s.id AND q.event_id > l.fired_through AND q.event_id <= s.drain_through)
      AND NOT EXISTS (SELECT 1 FROM lanes l JOIN batches b ON b.lane_id = l.id
                      WHERE l.session_id = s.id AND b.first_id <= s.drain_through AND b.state = 'claimed')
      AND NOT EXISTS (SELECT 1 FROM lanes l JOIN lane_runs r ON r.lane_id = l.id JOIN batches b ON b.id = r.batch_id
                      WHERE l.session_id = s.id AND b.first_id <= s.drain_through)
    RETURNING s.id
$$;

-- -- routing ----------------------------------------------------------------------------------------------

-- A routing round's write: the session's position moved from what the round read from (`from`) to what it read
-- through (`through`), and each lane's events queued, in one statement. Answers `saved: false` when another
-- router moved the position meanwhile (this round's reading is stale: nothing is written). A lane that was
-- empty is answered for a nudge, unless its runs hold all its slots or it waits in the queue for a key slot
-- (whoever frees the slot hands it on), but for a lane with an idle timer, whose clock learns of events from
-- nudges.
CREATE FUNCTION orchestrator_route(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_session text := p ->> 'session_id';
    q jsonb;
    l lanes%ROWTYPE;
    v_empty boolean;
    v_blocked boolean;
    v_queue boolean;
    v_nudges jsonb := '[]';
    v_newest bigint;
BEGIN
    PERFORM orchestrator_share_session(v_session);
    -- The keys' locks (a keyed lane may join the queue for a slot); routing appends no event.
    PERFORM orchestrator_keys_lock(v_session, k.listener)
        FROM (SELECT DISTINCT x ->> 'listener' AS listener FROM jsonb_array_elements(p -> 'lanes') x
              WHERE x ->> 'key_max' IS NOT NULL ORDER BY 1) k;
    UPDATE routing_cursors SET routed_event_id = (p ->> 'through')::bigint
        WHERE session_id = v_session AND routed_event_id = (p ->> 'from')::bigint;
    IF NOT FOUND THEN
        RETURN '{"saved": false}';
    END IF;
    INSERT INTO lanes (session_id, listener, lane, workflow_id)
        SELECT v_session, x ->> 'listener', x ->> 'lane', x ->> 'workflow_id' FROM jsonb_array_elements(p -> 'lanes') x
        ON CONFLICT (session_id, listener, lane) DO NOTHING;
    FOR q IN SELECT x FROM jsonb_array_elements(p -> 'lanes') x ORDER BY x ->> 'listener', x ->> 'lane' LOOP
        SELECT * INTO l FROM lanes
            WHERE session_id = v_session AND listener = q ->> 'listener' AND lane = q ->> 'lane' FOR UPDATE;
        INSERT INTO lane_events (lane_id, event_id)
            SELECT l.id, e::bigint FROM jsonb_array_elements_text(q -> 'event_ids') e ON CONFLICT DO NOTHING;
        v_empty := l.routed_through <= l.fired_through;
        v_blocked := (q ->> 'run_slots' IS NOT NULL
                      AND (SELECT count(*) FROM lane_runs r WHERE r.lane_id = l.id) >= (q ->> 'run_slots')::integer)
                  OR EXISTS (SELECT 1 FROM key_slots k WHERE k.lane_id = l.id AND NOT k.holding);
        -- A keyed lane made pending while every key slot is taken joins the queue for one now: the run that
        -- frees a slot hands it on, so the lane needs no nudge (nor a step of its own to find no slot).
        IF v_empty AND NOT v_blocked AND q ->> 'key_max' IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM key_slots k WHERE k.lane_id = l.id)
           AND (SELECT count(*) FROM key_slots k WHERE k.session_id = v_session AND k.listener = l.listener
                AND k.holding) >= (q ->> 'key_max')::integer THEN
            v_blocked := true;
            v_queue := true;
        ELSE
            v_queue := false;
        END IF;
        v_newest := (q ->> 'newest_id')::bigint;
        UPDATE lanes SET
            routed_through = greatest(routed_through, (q ->> 'through')::bigint),
            window_seconds = (q ->> 'window_seconds')::float8,
            run_slots = (q ->> 'run_slots')::integer,
            newest_id = CASE WHEN v_newest > newest_id THEN v_newest ELSE newest_id END,
            newest_at = CASE WHEN v_newest > newest_id THEN (q ->> 'newest_at')::timestamptz ELSE newest_at END,
            nudged_at = CASE WHEN v_empty THEN clock_timestamp() ELSE nudged_at END
            WHERE id = l.id;
        IF v_queue THEN
            PERFORM orchestrator_key_queue(l.id, v_session, l.listener);
        END IF;
        IF v_empty AND (NOT v_blocked OR (q ->> 'idle')::boolean) THEN
            v_nudges := v_nudges || jsonb_build_object(
                'listener', l.listener, 'lane', l.lane, 'workflow_id', l.workflow_id,
                'oldest_at', (SELECT extract(epoch FROM e.created_at) FROM lane_events w JOIN events e ON e.id = w.event_id
                              WHERE w.lane_id = l.id AND w.event_id > l.fired_through ORDER BY w.event_id LIMIT 1),
                'newest_at', (SELECT extract(epoch FROM newest_at) FROM lanes WHERE id = l.id),
                'newest_id', (SELECT newest_id FROM lanes WHERE id = l.id));
        END IF;
    END LOOP;
    RETURN jsonb_build_object('saved', true, 'now', extract(epoch FROM clock_timestamp()), 'nudges', v_nudges);
END
$$;
