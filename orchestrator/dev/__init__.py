"""The development runtime and the processes: `orchestrator dev`, `worker` and `api` started and stopped
(`runtime`), the embedded PostgreSQL and Temporal dev server, `dev`'s ports, its line per batch and `--reload`,
an app's declarations applied as a plan, the starter app, and what `status`, `events` and `keys` print. Above the
door and the engine, which it starts."""
