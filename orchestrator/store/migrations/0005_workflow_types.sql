-- The workflows the deployment's workers have registered, by name, and when a worker last said so (each worker
-- says it at start and then every minute: `orchestrator.registry`). `start_execution` refuses a workflow no
-- worker has registered lately, rather than start a run that no worker can run and that would hold one of the
-- session's `executions_per_session` for good. Not a session's data: retention leaves it.
CREATE TABLE worker_workflows (
    name    text PRIMARY KEY,
    seen_at timestamptz NOT NULL
);
