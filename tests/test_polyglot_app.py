"""`examples.polyglot.app` loads and its declarations are valid: a listener whose workflow runs on the task queue
the TypeScript worker in `examples/polyglot/worker` polls (run end to end by `clients/typescript`'s `npm test`)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.app_loader import load_app
from orchestrator.core.declaration import WorkflowAction, parse_declaration
from orchestrator.core.limits import Limits

ROOT = Path(__file__).resolve().parents[1]


def test_the_polyglot_app_declares_a_listener_on_the_typescript_workers_queue() -> None:
    app = load_app("examples.polyglot.app")
    assert app.workflows == [], "no Python workflow: the TypeScript worker runs it"
    schemas = {t["name"]: t["schema"] for t in app.event_types}
    [listener] = [parse_declaration(body, Limits(), schemas) for body in app.listeners]
    assert isinstance(listener.action, WorkflowAction)
    assert listener.action.task_queue == "polyglot"
    worker = (ROOT / "examples" / "polyglot" / "worker" / "src" / "worker.ts").read_text(encoding="utf-8")
    assert '"polyglot"' in worker, "the worker polls the queue the listener names"
    workflows = (ROOT / "examples" / "polyglot" / "worker" / "src" / "workflows.ts").read_text(encoding="utf-8")
    assert f"export async function {listener.action.workflow}(" in workflows
