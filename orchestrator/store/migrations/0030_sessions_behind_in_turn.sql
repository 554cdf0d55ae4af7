-- The router's slow poll for sessions behind their routed position (a lost NOTIFY, a restart) took, from every
-- router every 2 s, the first 1,000 found by a join of every session with its cursor, in no order. With more
-- sessions behind than that at once (a busy deployment, most of them being routed by their notifications), the
-- same first ones came back each time and a session whose wake-up was lost past them waited until the load
-- fell; and each router paid the whole join (about 30 ms at 100,000 sessions, `python -m bench.walls`).
--
-- Now the poll walks the sessions behind in id order from where the last poll stopped (wrapping), so each is
-- reached within (sessions behind / 1,000) polls; and the deployment polls once per interval, not once per
-- router: the one row below says where the walk stands and when it last ran, and a router takes its turn only
-- when the interval has passed (`orchestrator_sessions_behind`). Routing is anyone's: what one router's poll
-- finds it routes, whichever router lost the notification. The first poll makes the row.
CREATE TABLE orchestrator.routing_poll (
    one       boolean PRIMARY KEY DEFAULT true CHECK (one),
    after     text NOT NULL DEFAULT '',
    polled_at timestamptz NOT NULL DEFAULT '-infinity'
);
