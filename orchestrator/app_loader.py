"""The `--app` contract: a user's module of workflows, activities and listener declarations.

Owns finding the module and checking its module-level lists and its `migrate`; registering them is the worker's
job, running `migrate` is `dev/app_migrate.py`'s and applying the declarations `dev/app_plan.py`'s. A path to a
`.py` file is imported by its module name with its folder put on `sys.path`, because Temporal's workflow sandbox
re-imports each workflow class by module name and needs that name to resolve. A module name resolves from the
current folder first, as with `python -m`, since the `orchestrator` script's own folder is what Python puts on
the path.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from temporalio import workflow as temporal_workflow


class AppLoadError(Exception):
    """The `--app` module could not be imported or does not keep the contract; the message says which."""


@dataclass(frozen=True)
class UserApp:
    """What a user's app module declares, each optional (but not all): `workflows`, `activities`, `listeners`,
    `event_types` (each a `save_event_type` body), `captures` (each a `capture_table` body) and `schedules` (each a
    `create_schedule` body naming its session by `session_alias`); and `migrate`, a
    callable taking the platform's database URL (sync or async) that makes the app's own tables before its
    declarations are planned. Beside them, `app_name` (`owner`) and `take_over`."""

    name: str
    workflows: list[type] = field(default_factory=list)
    activities: list[Callable[..., Any]] = field(default_factory=list)
    listeners: list[dict[str, Any]] = field(default_factory=list)
    event_types: list[dict[str, Any]] = field(default_factory=list)
    captures: list[dict[str, Any]] = field(default_factory=list)
    schedules: list[dict[str, Any]] = field(default_factory=list)
    migrate: Callable[[str], Any] | None = None
    # Who declared what the app declares, on the platform (`app_declarations`): its `app_name` when it sets one,
    # else its module's name (two projects' files both named `app.py` are one app unless one names itself).
    owner: str | None = None
    # The names of declarations another app holds that this one takes over (`take_over`), as its plan's refusal
    # names them: a plan refuses to take another app's otherwise.
    take_over: frozenset[str] = frozenset()

    @property
    def declarer(self) -> str:
        """The name the platform records the app's declarations under (what its next plan may remove)."""
        return self.owner or self.name

    @property
    def title(self) -> str:
        """The app as its lines and refusals name it: by the name that owns its declarations, its module beside
        it when that differs (`shop (shopapp)`)."""
        return self.name if self.declarer == self.name else f"{self.declarer} ({self.name})"


def workflow_names(workflows: Sequence[type]) -> list[str]:
    """The registered names of workflow classes (what a listener's `action.workflow` refers to)."""
    names = []
    for cls in workflows:
        defn = temporal_workflow._Definition.from_class(cls)
        if defn is not None and defn.name is not None:
            names.append(defn.name)
    return names


# What an app module may declare; one that declares none of them is not one (a wrong module, a typo).
APP_NAMES = ("workflows", "activities", "listeners", "event_types", "captures", "schedules", "migrate")


def load_app(spec: str) -> UserApp:
    """Import the app named by `spec` (a module name such as `examples.missions.app`, or a `.py` path)."""
    module = _import(spec)
    if not any(hasattr(module, name) for name in APP_NAMES):
        raise AppLoadError(f"app {spec!r}: the module declares none of {', '.join(f'`{n}`' for n in APP_NAMES)}")
    return UserApp(
        name=module.__name__,
        workflows=_workflows(spec, module),
        activities=_activities(spec, module),
        listeners=_bodies(spec, module, "listeners"),
        event_types=_bodies(spec, module, "event_types"),
        captures=_bodies(spec, module, "captures"),
        schedules=_bodies(spec, module, "schedules"),
        migrate=_migrate(spec, module),
        owner=_owner(spec, module),
        take_over=_take_over(spec, module),
    )


def _owner(spec: str, module: ModuleType) -> str | None:
    """The name the app declares for its declarations' owner (`UserApp.owner`), if it declares one."""
    declared = getattr(module, "app_name", None)
    if declared is not None and (not isinstance(declared, str) or not declared.strip() or len(declared) > 200):
        raise AppLoadError(f"app {spec!r}: `app_name` must be a non-empty string of at most 200 characters")
    return declared


def _take_over(spec: str, module: ModuleType) -> frozenset[str]:
    """The declarations the app takes over from another app (`UserApp.take_over`), by name."""
    names = _as_list(spec, module, "take_over")
    if not all(isinstance(name, str) and name for name in names):
        raise AppLoadError(f"app {spec!r}: `take_over` must be a list of declarations' names (strings)")
    return frozenset(names)


def _import(spec: str) -> ModuleType:
    if not spec.strip():
        raise AppLoadError("app: the module name or path is empty")
    if spec.endswith(".py") or "/" in spec or "\\" in spec:
        return _import_path(spec)
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as err:
        if err.name is not None and (spec == err.name or spec.startswith(err.name + ".")):
            raise AppLoadError(f"app {spec!r}: no module named {err.name!r} (is it on PYTHONPATH?)") from err
        raise AppLoadError(f"app {spec!r}: importing it failed: {err}") from err
    except Exception as err:
        raise AppLoadError(f"app {spec!r}: importing it failed: {type(err).__name__}: {err}") from err


def _import_path(spec: str) -> ModuleType:
    path = Path(spec).expanduser().resolve()
    if path.suffix != ".py":
        raise AppLoadError(f"app {spec!r}: a path must name a .py file")
    if not path.is_file():
        raise AppLoadError(f"app {spec!r}: no such file")
    name = path.stem
    if not name.isidentifier():
        raise AppLoadError(f"app {spec!r}: the file name must be a valid module name")
    loaded = sys.modules.get(name)
    if loaded is not None:
        loaded_file = getattr(loaded, "__file__", None)
        if loaded_file is not None and Path(loaded_file).resolve() == path:
            return loaded
        raise AppLoadError(f"app {spec!r}: a different module named {name!r} is already imported; rename the file")
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        return importlib.import_module(name)
    except Exception as err:
        raise AppLoadError(f"app {spec!r}: importing it failed: {type(err).__name__}: {err}") from err


def _as_list(spec: str, module: ModuleType, attr: str) -> list[Any]:
    if not hasattr(module, attr):
        return []
    value = getattr(module, attr)
    if not isinstance(value, list | tuple):
        raise AppLoadError(f"app {spec!r}: `{attr}` must be a list, not {type(value).__name__}")
    return list(value)


def _workflows(spec: str, module: ModuleType) -> list[type]:
    # An app of listeners that write objects or thread items, or start runs another worker runs, has none.
    workflows = _as_list(spec, module, "workflows")
    for index, item in enumerate(workflows):
        if not isinstance(item, type):
            raise AppLoadError(f"app {spec!r}: workflows[{index}] must be a workflow class, not {item!r}")
        if getattr(item, "__temporal_workflow_definition", None) is None:
            raise AppLoadError(
                f"app {spec!r}: workflows[{index}] ({item.__name__}) is not decorated with @workflow.defn"
            )
    return workflows


def _activities(spec: str, module: ModuleType) -> list[Callable[..., Any]]:
    activities = _as_list(spec, module, "activities")
    for index, item in enumerate(activities):
        if not callable(item):
            raise AppLoadError(f"app {spec!r}: activities[{index}] must be an activity function, not {item!r}")
        if getattr(item, "__temporal_activity_definition", None) is None:
            name = getattr(item, "__name__", repr(item))
            raise AppLoadError(f"app {spec!r}: activities[{index}] ({name}) is not decorated with @activity.defn")
    return activities


def _bodies(spec: str, module: ModuleType, name: str) -> list[dict[str, Any]]:
    bodies = _as_list(spec, module, name)
    for index, item in enumerate(bodies):
        if not isinstance(item, dict):
            raise AppLoadError(
                f"app {spec!r}: {name}[{index}] must be a declaration body (a dict), not {type(item).__name__}"
            )
    return bodies


def _migrate(spec: str, module: ModuleType) -> Callable[[str], Any] | None:
    migrate: Callable[[str], Any] | None = getattr(module, "migrate", None)
    if migrate is None:
        return None
    if not callable(migrate):
        raise AppLoadError(
            f"app {spec!r}: `migrate` must be a function taking the database URL, not {type(migrate).__name__}"
        )
    try:
        signature = inspect.signature(migrate)
    except (TypeError, ValueError):  # a callable whose signature Python cannot read: called as it is
        return migrate
    try:
        signature.bind("postgresql://")
    except TypeError:
        raise AppLoadError(
            f"app {spec!r}: `migrate` must take one argument, the database URL (its signature is {signature})"
        ) from None
    return migrate
