"""The `--app` contract: module-level `workflows` (required), `activities`, `listeners` and `migrate` (optional)."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import pytest

from orchestrator.app_loader import AppLoadError, UserApp, load_app

GOOD_APP = """
from temporalio import activity, workflow


@workflow.defn
class Greet:
    @workflow.run
    async def run(self, name: str) -> str:
        return name


@activity.defn
async def shout(text: str) -> str:
    return text.upper()


workflows = [Greet]
activities = [shout]
listeners = [{"name": "greeter"}]
"""


def write_app(folder: Path, source: str) -> Path:
    path = folder / f"app_{uuid.uuid4().hex}.py"
    path.write_text(textwrap.dedent(source))
    return path


def test_a_py_path_loads_its_three_lists(tmp_path: Path) -> None:
    path = write_app(tmp_path, GOOD_APP)

    app = load_app(str(path))

    assert isinstance(app, UserApp)
    assert app.name == path.stem
    assert [w.__name__ for w in app.workflows] == ["Greet"]
    assert [a.__name__ for a in app.activities] == ["shout"]
    assert app.listeners == [{"name": "greeter"}]


def test_a_module_name_loads_and_the_workflow_module_is_importable_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_app(tmp_path, GOOD_APP)
    monkeypatch.syspath_prepend(str(tmp_path))

    app = load_app(path.stem)

    # Temporal's sandbox re-imports each workflow by its module name.
    assert app.workflows[0].__module__ == path.stem


def test_loading_the_same_file_twice_answers_the_same_module(tmp_path: Path) -> None:
    path = write_app(tmp_path, GOOD_APP)

    assert load_app(str(path)).workflows == load_app(str(path)).workflows


def test_activities_and_listeners_are_optional(tmp_path: Path) -> None:
    path = write_app(
        tmp_path,
        """
        from temporalio import workflow

        @workflow.defn
        class Only:
            @workflow.run
            async def run(self) -> None:
                return None

        workflows = [Only]
        """,
    )

    app = load_app(str(path))

    assert (app.activities, app.listeners) == ([], [])


def test_an_app_of_listeners_alone_needs_no_workflows(tmp_path: Path) -> None:
    """Listeners that write thread items or objects start no workflow of the app's: the module says only them."""
    path = write_app(
        tmp_path,
        """
        event_types = [{"name": "ticket.opened", "schema": {"type": "object"}}]
        listeners = [{
            "name": "echo",
            "filter": {"types": ["ticket.opened"]},
            "action": {"type": "object", "alias": "views/last", "value": {"type": "last", "id": "{{ batch.last_id }}"}},
        }]
        """,
    )

    app = load_app(str(path))

    assert (app.workflows, [body["name"] for body in app.listeners]) == ([], ["echo"])


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("WORKFLOWS = []", "declares none of `workflows`, `activities`, `listeners`"),
        ("workflows = 'Greet'", "`workflows` must be a list, not str"),
        ("workflows = [42]", "workflows[0] must be a workflow class"),
        (
            "class Plain: ...\nworkflows = [Plain]",
            "workflows[0] (Plain) is not decorated with @workflow.defn",
        ),
        (
            "workflows = []\nactivities = [print]",
            "activities[0] (print) is not decorated with @activity.defn",
        ),
        ("workflows = []\nactivities = [1]", "activities[0] must be an activity function"),
        (
            "workflows = []\nlisteners = ['orchestrate']",
            "listeners[0] must be a declaration body (a dict), not str",
        ),
        ("workflows = []\nlisteners = {}", "`listeners` must be a list, not dict"),
        ("raise RuntimeError('boom')", "importing it failed: RuntimeError: boom"),
    ],
)
def test_a_broken_app_is_refused_naming_what_is_wrong(tmp_path: Path, source: str, message: str) -> None:
    path = write_app(tmp_path, source)

    with pytest.raises(AppLoadError) as caught:
        load_app(str(path))

    assert message in str(caught.value)


def test_a_missing_module_names_the_module() -> None:
    name = f"no_such_app_{uuid.uuid4().hex}"

    with pytest.raises(AppLoadError, match=f"no module named '{name}'"):
        load_app(name)


def test_a_missing_file_or_a_non_py_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AppLoadError, match="no such file"):
        load_app(str(tmp_path / "absent.py"))
    (tmp_path / "app.txt").write_text("workflows = []")
    with pytest.raises(AppLoadError, match=r"must name a \.py file"):
        load_app(str(tmp_path / "app.txt"))


def test_migrate_is_optional_and_loaded_when_the_module_has_one(tmp_path: Path) -> None:
    without = load_app(str(write_app(tmp_path, "workflows = []")))
    with_one = load_app(str(write_app(tmp_path, "workflows = []\nasync def migrate(database_url): pass")))

    assert without.migrate is None
    assert with_one.migrate is not None and with_one.migrate.__name__ == "migrate"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("migrate = 'alembic upgrade head'", "`migrate` must be a function taking the database URL, not str"),
        ("def migrate(): pass", "`migrate` must take one argument, the database URL (its signature is ())"),
        ("def migrate(url, schema): pass", "`migrate` must take one argument, the database URL"),
    ],
)
def test_a_migrate_that_cannot_take_the_database_url_is_refused(tmp_path: Path, source: str, message: str) -> None:
    path = write_app(tmp_path, f"workflows = []\n{source}")

    with pytest.raises(AppLoadError) as caught:
        load_app(str(path))

    assert message in str(caught.value)
