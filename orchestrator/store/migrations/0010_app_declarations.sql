-- Which app declared each listener and event type (`orchestrator plan`, SPEC section 15): applying an app's
-- declarations removes what that app declared before and no longer does, and nothing anyone else declared.
CREATE TABLE app_declarations (
    kind text NOT NULL CHECK (kind IN ('event_type', 'listener')),
    name text NOT NULL,
    app  text NOT NULL,
    PRIMARY KEY (kind, name)
);
