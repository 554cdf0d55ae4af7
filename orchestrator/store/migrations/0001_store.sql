-- The store: sessions and their event stream, objects, threads, executions, listeners, outcomes, schedules.
-- The lanes (queues, batches, slots) are 0002's.

CREATE SEQUENCE event_ids;

-- A session's row is also its stream's write lock: every transaction that appends an event locks the row
-- (FOR NO KEY UPDATE) before it draws the event's id and holds it until commit, so within one session ids are
-- drawn in commit order. A reader paging by id therefore never skips an event that commits late. The lock
-- is the weaker row lock on purpose: a row that merely refers to the session (a lane, an execution) checks
-- its foreign key with FOR KEY SHARE, which it leaves free, so the engine never queues behind the writers.
-- `drain_through`: `close_session` with `drain: true` keeps the session open until what was pending when it
-- was asked (events up to this id) has fired and the runs of those batches have ended.
CREATE TABLE sessions (
    id            text PRIMARY KEY,
    alias         text UNIQUE,
    status        text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    closed_at     timestamptz,
    last_event_id bigint NOT NULL DEFAULT 0,
    drain_through bigint
);
CREATE INDEX sessions_draining ON sessions (id) WHERE drain_through IS NOT NULL AND status = 'open';

-- The router's durable position in each session's stream: a round saves it only over the position it read
-- from, in the transaction that queues what it read (0002's `orchestrator_route`).
CREATE TABLE routing_cursors (
    session_id      text PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    routed_event_id bigint NOT NULL DEFAULT 0
);

-- `traceparent`: the W3C traceparent of the span the write ran in (NULL when nothing was traced), so the
-- router, the lane's batch and the run it starts continue the trace of the write that caused them.
CREATE TABLE events (
    id              bigint PRIMARY KEY,
    session_id      text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    type            text NOT NULL,
    alias           text,
    item            jsonb,
    execution       jsonb,
    source          jsonb NOT NULL DEFAULT '{}',
    depth           integer NOT NULL DEFAULT 0,
    data            jsonb,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- A retried write carries the same key and finds the same event again.
    idempotency_key text,
    traceparent     text,
    -- What caused it: `{"request": ...}`, `{"execution": ..., "batch": ...}`, `{"batch": ...}`, `{"schedule": ...}`.
    cause           jsonb,
    -- For graph.changed: the ids of the nodes the update changed.
    graph           jsonb
);
CREATE INDEX events_session_id ON events (session_id, id);
CREATE UNIQUE INDEX events_idempotency ON events (session_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
-- What a run wrote, for `explain_event` following causes forward.
CREATE INDEX events_caused_by_run ON events (session_id, (cause ->> 'execution')) WHERE cause ? 'execution';
-- What a listener's batch wrote (its action's writes, its receipt), for the same.
CREATE INDEX events_caused_by_batch ON events (session_id, (cause -> 'batch' ->> 'listener'),
    ((cause -> 'batch' ->> 'first_id')::bigint)) WHERE cause ? 'batch' AND NOT cause ? 'execution';

CREATE TABLE objects (
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    alias      text NOT NULL,
    value      jsonb NOT NULL,
    rev        integer NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (session_id, alias)
);
CREATE INDEX objects_prefix ON objects (session_id, alias text_pattern_ops);

-- A `json` item's message may be any JSON value: it is kept in `message_json`; every other item's in
-- `message`. An item has one or the other.
CREATE TABLE thread_items (
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    session_id   text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    alias        text NOT NULL,
    id           text NOT NULL,
    type         text NOT NULL,
    role         text,
    message      text,
    message_json jsonb,
    metadata     jsonb,
    source       jsonb NOT NULL DEFAULT '{}',
    event_id     bigint NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (session_id, alias, id)
);
CREATE INDEX thread_items_order ON thread_items (session_id, alias, seq);

-- A run of a workflow in a session. A listener's run is recorded when its batch is taken, before its start
-- (a run may end before the call that started it returns); its `execution.started` event is written once the
-- start went through, or with its end if that comes first (`started_event_id`). `run_key`, `depth` and
-- `checked_at` are what the router's sweep needs for a run that closed without reporting its end.
CREATE TABLE executions (
    id               text PRIMARY KEY,
    session_id       text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    workflow         text NOT NULL,
    listener         text,
    lane             text,
    status           text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'completed', 'failed', 'stopped')),
    batch            jsonb,
    error            text,
    run_key          text,
    depth            integer NOT NULL DEFAULT 0,
    -- What caused the run (its batch, the request, the schedule): its `execution.started` event's cause.
    cause            jsonb,
    started_event_id bigint,
    started_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at         timestamptz,
    checked_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX executions_session ON executions (session_id, listener, started_at);
CREATE INDEX executions_running ON executions (session_id) WHERE status = 'running';
CREATE INDEX executions_unchecked ON executions (checked_at) WHERE status = 'running';

-- The application's own event types: a JSON Schema for their `data`, and who may emit them from outside.
CREATE TABLE event_types (
    name        text PRIMARY KEY,
    schema      jsonb NOT NULL,
    allow       jsonb,
    description text,
    saved_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- A session's graph: nodes (JSON values with a `type`, by id) and edges, changed all or none by `update_graph`.
CREATE TABLE graphs (
    session_id text PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    rev        integer NOT NULL DEFAULT 0,
    nodes      jsonb NOT NULL DEFAULT '{}',
    edges      jsonb NOT NULL DEFAULT '[]'
);

-- Listener declarations belong to the application, not to a session. Every save is a new version.
CREATE TABLE listener_versions (
    name         text NOT NULL,
    version      integer NOT NULL,
    body         jsonb NOT NULL,
    saved_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    effective_at timestamptz NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE TABLE listeners (
    name       text PRIMARY KEY,
    version    integer NOT NULL,
    deleted_at timestamptz
);

CREATE TABLE listener_switches (
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name       text NOT NULL,
    enabled    boolean NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (session_id, name)
);

-- A listener paused (in one session, or in all: `session_id` null) keeps routing but fires nothing; its
-- events wait in its lanes until it is resumed.
CREATE TABLE listener_pauses (
    name       text NOT NULL,
    session_id text REFERENCES sessions (id) ON DELETE CASCADE,
    paused_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE UNIQUE INDEX listener_pauses_key ON listener_pauses (name, coalesce(session_id, ''));

CREATE TABLE outcomes (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id   text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    listener     text NOT NULL,
    version      integer,
    lane         text NOT NULL,
    status       text NOT NULL,
    reason       text,
    first_id     bigint NOT NULL,
    last_id      bigint NOT NULL,
    event_ids    bigint[] NOT NULL,
    retry        integer NOT NULL DEFAULT 0,
    execution_id text,
    message      text,
    -- The lane's own key for the batch: recording an outcome twice (a driver that runs again) keeps one row.
    batch_key    text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (session_id, listener, batch_key)
);
CREATE INDEX outcomes_recent ON outcomes (session_id, listener, id DESC);

-- Counts by status kept beside the rows, so that a session with thousands of batches answers at once.
CREATE TABLE outcome_counts (
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    listener   text NOT NULL,
    status     text NOT NULL,
    count      bigint NOT NULL,
    PRIMARY KEY (session_id, listener, status)
);

-- Schedules (SPEC section 6): the definition of each session's schedule, addressed by (session, alias), and
-- the result of each of its firings. Temporal's schedule (id `schedule:<session>:<alias>`) decides when a
-- schedule fires; this row is what a firing performs, so changing the target needs no Temporal update, and
-- a firing that finds no row (the schedule was deleted) does nothing.
CREATE TABLE schedules (
    session_id  text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    alias       text NOT NULL,
    schedule_id text NOT NULL UNIQUE,
    body        jsonb NOT NULL,
    enabled     boolean NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (session_id, alias)
);

-- One row per firing, kept once per scheduled time (a retried firing records nothing new). No foreign key
-- to `schedules`: a firing may finish just after its schedule is deleted, and then it is dropped quietly.
CREATE TABLE schedule_runs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id   text NOT NULL,
    alias        text NOT NULL,
    scheduled_at timestamptz NOT NULL,
    status       text NOT NULL CHECK (status IN ('success', 'invocation_error', 'access_error')),
    message      text,
    event_id     bigint,
    execution_id text,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (session_id, alias, scheduled_at)
);
CREATE INDEX schedule_runs_recent ON schedule_runs (session_id, alias, id DESC);

-- Routers and streams wake on these instead of polling: one notification per session per committing
-- transaction (PostgreSQL folds identical notifications of one transaction into one), raised once per
-- statement (a trigger call per row cost a bulk write of a thousand events 6 us an event).
CREATE FUNCTION notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('orchestrator_events', s.session_id) FROM (SELECT DISTINCT session_id FROM written) s;
    RETURN NULL;
END
$$;
CREATE TRIGGER events_notify AFTER INSERT ON events REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION notify_events();

CREATE FUNCTION notify_listener() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('orchestrator_listeners', NEW.name);
    RETURN NULL;
END
$$;
CREATE TRIGGER listeners_notify AFTER INSERT OR UPDATE ON listeners FOR EACH ROW EXECUTE FUNCTION notify_listener();

-- An event's row, under the session lock its caller holds: with a key, a retried append finds the first one's
-- id. The caller moves the session's `last_event_id`, once per statement: a bulk write that moved it once per
-- event would leave a chain of a thousand versions of the session's row for the next writer to walk.
CREATE FUNCTION orchestrator_event_row(
    p_session text, p_type text, p_alias text, p_item jsonb, p_execution jsonb, p_source jsonb, p_depth integer,
    p_data jsonb, p_key text, p_traceparent text, p_cause jsonb
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_event bigint;
BEGIN
    IF p_key IS NOT NULL THEN
        SELECT e.id INTO v_event FROM events e WHERE e.session_id = p_session AND e.idempotency_key = p_key;
        IF FOUND THEN
            RETURN v_event;
        END IF;
    END IF;
    v_event := nextval('event_ids');
    INSERT INTO events (id, session_id, type, alias, item, execution, source, depth, data, idempotency_key, traceparent,
                        cause)
        VALUES (v_event, p_session, p_type, p_alias, p_item, p_execution, coalesce(p_source, '{}'), p_depth, p_data,
                p_key, p_traceparent, p_cause);
    RETURN v_event;
END
$$;

-- The session's row shared for the rest of the transaction: what the engine's functions that append no event
-- take before anything else. It waits for nothing the writers hold (they take FOR NO KEY UPDATE), and a
-- session's deletion (FOR UPDATE first, 0003_retention.sql) waits for it or it for the deletion, never a cycle
-- through the rows each has locked after (the rows a foreign key check would lock it for come later).
CREATE FUNCTION orchestrator_share_session(p_session text) RETURNS void LANGUAGE sql AS $$
    SELECT NULL::void FROM sessions WHERE id = p_session FOR KEY SHARE
$$;

-- Whether the session is there and open, its row locked for the rest of the transaction (event ids in commit
-- order): 'ok', 'not_found' (also for one being deleted: 0003_retention.sql) or 'session_not_open'.
CREATE FUNCTION orchestrator_lock_session(p_session text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
BEGIN
    SELECT s.status INTO v_status FROM sessions s WHERE s.id = p_session FOR NO KEY UPDATE;
    IF NOT FOUND OR v_status = 'deleting' THEN
        RETURN 'not_found';
    END IF;
    RETURN CASE WHEN v_status = 'open' THEN 'ok' ELSE 'session_not_open' END;
END
$$;

-- Appends one event to an open or closed session (None: no such session). The engine's functions (0002)
-- append execution events, receipts and failures through it.
CREATE FUNCTION orchestrator_append(
    p_session text, p_type text, p_alias text, p_item jsonb, p_execution jsonb, p_source jsonb, p_depth integer,
    p_data jsonb, p_key text, p_traceparent text, p_cause jsonb
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_event bigint;
BEGIN
    IF orchestrator_lock_session(p_session) = 'not_found' THEN
        RETURN NULL;
    END IF;
    v_event := orchestrator_event_row(p_session, p_type, p_alias, p_item, p_execution, p_source, p_depth, p_data, p_key,
                                      p_traceparent, p_cause);
    UPDATE sessions SET last_event_id = v_event WHERE id = p_session AND last_event_id < v_event;
    RETURN v_event;
END
$$;

-- An object's write and its event, under the session lock its caller holds: an outcome (ok, replayed,
-- rev_conflict), the rev and the event id.
CREATE FUNCTION orchestrator_object_row(
    p_session text, p_alias text, p_value jsonb, p_if_rev integer, p_source jsonb, p_depth integer, p_key text,
    p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_outcome text, o_rev integer, o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_rev integer;
    v_event bigint;
BEGIN
    IF p_key IS NOT NULL THEN
        SELECT e.id, (e.data ->> 'rev')::integer INTO v_event, v_rev
            FROM events e WHERE e.session_id = p_session AND e.idempotency_key = p_key;
        IF FOUND THEN
            RETURN QUERY SELECT 'replayed'::text, v_rev, v_event;
            RETURN;
        END IF;
    END IF;
    SELECT o.rev INTO v_rev FROM objects o WHERE o.session_id = p_session AND o.alias = p_alias;
    IF p_if_rev IS NOT NULL AND coalesce(v_rev, 0) <> p_if_rev THEN
        RETURN QUERY SELECT 'rev_conflict'::text, coalesce(v_rev, 0), NULL::bigint;
        RETURN;
    END IF;
    INSERT INTO objects AS o (session_id, alias, value, rev) VALUES (p_session, p_alias, p_value, 1)
        ON CONFLICT (session_id, alias) DO UPDATE
        SET value = EXCLUDED.value, rev = o.rev + 1, updated_at = clock_timestamp()
        RETURNING o.rev INTO v_rev;
    v_event := nextval('event_ids');
    INSERT INTO events (id, session_id, type, alias, source, depth, data, idempotency_key, traceparent, cause)
        VALUES (v_event, p_session, 'object.written', p_alias, p_source, p_depth,
                jsonb_build_object('rev', v_rev), p_key, p_traceparent, p_cause);
    RETURN QUERY SELECT 'ok'::text, v_rev, v_event;
END
$$;

-- An item's post and its event, under the session lock its caller holds: an outcome (ok, replayed), the item
-- id and the event id. Items never change: posting an id that is already there answers the first post.
CREATE FUNCTION orchestrator_item_row(
    p_session text, p_alias text, p_id text, p_type text, p_role text, p_message text, p_message_json jsonb,
    p_preview text, p_metadata jsonb, p_source jsonb, p_depth integer, p_key text, p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_outcome text, o_item text, o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_item text;
    v_event bigint;
BEGIN
    IF p_key IS NOT NULL THEN
        SELECT e.item ->> 'id', e.id INTO v_item, v_event
            FROM events e WHERE e.session_id = p_session AND e.idempotency_key = p_key;
        IF FOUND THEN
            RETURN QUERY SELECT 'replayed'::text, v_item, v_event;
            RETURN;
        END IF;
    END IF;
    SELECT t.event_id INTO v_event FROM thread_items t
        WHERE t.session_id = p_session AND t.alias = p_alias AND t.id = p_id;
    IF FOUND THEN
        RETURN QUERY SELECT 'replayed'::text, p_id, v_event;
        RETURN;
    END IF;
    v_event := nextval('event_ids');
    INSERT INTO events (id, session_id, type, alias, item, source, depth, idempotency_key, traceparent, cause)
        VALUES (v_event, p_session, 'thread.item_posted', p_alias,
                jsonb_strip_nulls(jsonb_build_object('id', p_id, 'type', p_type, 'role', p_role,
                                                     'message', p_preview)),
                p_source, p_depth, p_key, p_traceparent, p_cause);
    INSERT INTO thread_items (session_id, alias, id, type, role, message, message_json, metadata, source, event_id)
        VALUES (p_session, p_alias, p_id, p_type, p_role, p_message, p_message_json, p_metadata, p_source, v_event);
    RETURN QUERY SELECT 'ok'::text, p_id, v_event;
END
$$;

-- The two hot writes, one statement each, so a session's lock is held for one statement. Each answers an
-- outcome (ok, replayed, not_found, session_not_open, rev_conflict), the rev or item id, and the event id.
CREATE FUNCTION orchestrator_write_object(
    p_session text, p_alias text, p_value jsonb, p_if_rev integer, p_source jsonb, p_depth integer, p_key text,
    p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_outcome text, o_rev integer, o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_lock text := orchestrator_lock_session(p_session);
    r record;
BEGIN
    IF v_lock <> 'ok' THEN
        RETURN QUERY SELECT v_lock, NULL::integer, NULL::bigint;
        RETURN;
    END IF;
    SELECT * INTO r FROM orchestrator_object_row(p_session, p_alias, p_value, p_if_rev, p_source, p_depth, p_key,
                                                 p_traceparent, p_cause);
    IF r.o_outcome = 'ok' THEN
        UPDATE sessions SET last_event_id = r.o_event WHERE id = p_session;
    END IF;
    RETURN QUERY SELECT r.o_outcome, r.o_rev, r.o_event;
END
$$;

CREATE FUNCTION orchestrator_post_thread_item(
    p_session text, p_alias text, p_id text, p_type text, p_role text, p_message text, p_message_json jsonb,
    p_preview text, p_metadata jsonb, p_source jsonb, p_depth integer, p_key text, p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_outcome text, o_item text, o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_lock text := orchestrator_lock_session(p_session);
    r record;
BEGIN
    IF v_lock <> 'ok' THEN
        RETURN QUERY SELECT v_lock, NULL::text, NULL::bigint;
        RETURN;
    END IF;
    SELECT * INTO r FROM orchestrator_item_row(p_session, p_alias, p_id, p_type, p_role, p_message, p_message_json,
                                               p_preview, p_metadata, p_source, p_depth, p_key, p_traceparent, p_cause);
    IF r.o_outcome = 'ok' THEN
        UPDATE sessions SET last_event_id = r.o_event WHERE id = p_session;
    END IF;
    RETURN QUERY SELECT r.o_outcome, r.o_item, r.o_event;
END
$$;

-- Many writes of one request in one statement and one transaction, all or none, the session locked once and
-- its `last_event_id` moved once. The first that cannot be written raises `orchestrator: <index> <outcome>
-- <rev>` and nothing is kept.
CREATE FUNCTION orchestrator_write_objects(
    p_session text, p_items jsonb, p_source jsonb, p_depth integer, p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_rev integer, o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_lock text := orchestrator_lock_session(p_session);
    v_item jsonb;
    v_index integer := 0;
    v_last bigint := 0;
    r record;
BEGIN
    IF v_lock <> 'ok' THEN
        RAISE EXCEPTION 'orchestrator: 0 % 0', v_lock USING ERRCODE = 'P0001';
    END IF;
    FOR v_item IN SELECT x FROM jsonb_array_elements(p_items) x LOOP
        SELECT * INTO r FROM orchestrator_object_row(
            p_session, v_item ->> 'alias', v_item -> 'value', (v_item ->> 'if_rev')::integer, p_source, p_depth,
            v_item ->> 'key', p_traceparent, p_cause);
        IF r.o_outcome NOT IN ('ok', 'replayed') THEN
            RAISE EXCEPTION 'orchestrator: % % %', v_index, r.o_outcome, coalesce(r.o_rev, 0) USING ERRCODE = 'P0001';
        END IF;
        v_last := greatest(v_last, r.o_event);
        o_rev := r.o_rev;
        o_event := r.o_event;
        RETURN NEXT;
        v_index := v_index + 1;
    END LOOP;
    UPDATE sessions SET last_event_id = v_last WHERE id = p_session AND last_event_id < v_last;
END
$$;

CREATE FUNCTION orchestrator_post_thread_items(
    p_session text, p_alias text, p_items jsonb, p_source jsonb, p_depth integer, p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_item text, o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_lock text := orchestrator_lock_session(p_session);
    v_item jsonb;
    v_index integer := 0;
    v_last bigint := 0;
    r record;
BEGIN
    IF v_lock <> 'ok' THEN
        RAISE EXCEPTION 'orchestrator: 0 % 0', v_lock USING ERRCODE = 'P0001';
    END IF;
    FOR v_item IN SELECT x FROM jsonb_array_elements(p_items) x LOOP
        SELECT * INTO r FROM orchestrator_item_row(
            p_session, p_alias, v_item ->> 'id', v_item ->> 'type', v_item ->> 'role', v_item ->> 'message',
            v_item -> 'message_json', v_item ->> 'preview', v_item -> 'metadata', p_source, p_depth, v_item ->> 'key',
            p_traceparent, p_cause);
        IF r.o_outcome NOT IN ('ok', 'replayed') THEN
            RAISE EXCEPTION 'orchestrator: % % 0', v_index, r.o_outcome USING ERRCODE = 'P0001';
        END IF;
        v_last := greatest(v_last, r.o_event);
        o_item := r.o_item;
        o_event := r.o_event;
        RETURN NEXT;
        v_index := v_index + 1;
    END LOOP;
    UPDATE sessions SET last_event_id = v_last WHERE id = p_session AND last_event_id < v_last;
END
$$;

-- The application's own events (`emit_events`), each checked against its type before this statement: appended
-- in order under the session's lock, in one transaction, as one statement (a function call per event cost
-- about 45 us of PostgreSQL's time an event). Each answers its id, in the order given, ids drawn in that order;
-- an event whose key the session holds answers that event's id and writes nothing, and a key given twice in
-- one call writes once.
CREATE FUNCTION orchestrator_emit(
    p_session text, p_events jsonb, p_source jsonb, p_depth integer, p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_lock text := orchestrator_lock_session(p_session);
    v_ids bigint[];
    v_last bigint;
BEGIN
    IF v_lock <> 'ok' THEN
        RAISE EXCEPTION 'orchestrator: 0 % 0', v_lock USING ERRCODE = 'P0001';
    END IF;
    WITH given AS (
        SELECT g.n, g.x, g.x ->> 'key' AS key,
               row_number() OVER (PARTITION BY g.x ->> 'key' ORDER BY g.n) AS nth
        FROM jsonb_array_elements(p_events) WITH ORDINALITY AS g(x, n)
    ), known AS (
        SELECT g.n, e.id FROM given g JOIN events e ON e.session_id = p_session AND e.idempotency_key = g.key
    ), numbered AS MATERIALIZED (
        -- nextval over rows already in order: ids follow the events' order.
        SELECT o.n, o.x, o.key, nextval('event_ids') AS id
        FROM (SELECT g.n, g.x, g.key FROM given g
              WHERE NOT EXISTS (SELECT 1 FROM known k WHERE k.n = g.n)
                AND (g.key IS NULL OR g.nth = 1)
              ORDER BY g.n) o
    ), written AS (
        INSERT INTO events (id, session_id, type, source, depth, data, idempotency_key, traceparent, cause)
        SELECT b.id, p_session, b.x ->> 'type',
               CASE WHEN b.x ? 'client' THEN coalesce(p_source, '{}') || jsonb_build_object('client', b.x ->> 'client')
                    ELSE coalesce(p_source, '{}') END,
               p_depth, b.x -> 'data', b.key, p_traceparent, p_cause
        FROM numbered b ORDER BY b.n
    )
    SELECT array_agg(coalesce(k.id, b.id, (SELECT d.id FROM numbered d WHERE d.key = g.key)) ORDER BY g.n)
    INTO v_ids
    FROM given g LEFT JOIN known k ON k.n = g.n LEFT JOIN numbered b ON b.n = g.n;
    v_last := (SELECT max(i) FROM unnest(v_ids) i);
    UPDATE sessions SET last_event_id = v_last WHERE id = p_session AND last_event_id < v_last;
    RETURN QUERY SELECT u.id FROM unnest(v_ids) WITH ORDINALITY AS u(id, n) ORDER BY u.n;
END
$$;
