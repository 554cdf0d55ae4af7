"""`orchestrator dev --reload`: the worker starts again on the app's new code when the app's files change.

Owns watching the app's folder (the `.py` files' modification times, looked at every second, so no watcher
library is needed) and the swap. The new code is imported first, while the old worker still runs: a file that
does not import is said, and the worker is left as it is until the next change. Then the worker and the router
stop, the app's listeners are saved (a changed one takes effect after the activation delay, and `Ready.` says
when), and both start again, registering the new workflows and activities. The servers, the store and the
HTTP API stay up. Only the modules the app brought in from its folder are imported again, never the
platform's or a library's.

Temporal's sandbox imports a workflow's module afresh for every run, from the file as it is: new runs see a
workflow file's change with or without a reload (a broken file fails their workflow task until it is fixed),
and a run in flight whose history the change no longer replays fails its task until the code is changed
back, as on any deploy. A reload is what brings new activities, listeners and workflow registrations.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from temporalio.client import Client as TemporalClient
from temporalio.worker import Worker

from orchestrator.app_loader import AppLoadError, UserApp, load_app
from orchestrator.config import Settings
from orchestrator.engine.wiring import platform_components
from orchestrator.engine.worker import build_worker
from orchestrator.platform import Platform

# How often the app's files are looked at; a save is picked up within this long.
POLL_SECONDS = 1.0
# Folders never watched: tools' and version control's, and the app's own state.
SKIPPED = {"__pycache__", "node_modules", "venv", ".orchestrator"}
# The most files watched: an app folder that is a whole repository is watched no further than this.
MAX_FILES = 5_000


def python_files(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.name in SKIPPED:
            continue
        if path.is_dir():
            yield from python_files(path)
        elif path.suffix == ".py":
            yield path


def modified(folder: Path) -> dict[Path, float]:
    """Each `.py` file under `folder` with its modification time."""
    found: dict[Path, float] = {}
    for path in python_files(folder):
        if len(found) >= MAX_FILES:
            break
        with contextlib.suppress(OSError):  # gone between the listing and the look
            found[path] = path.stat().st_mtime
    return found


def loaded_under(names: set[str], folder: Path) -> set[str]:
    """Those of the modules `names` whose file lies under `folder`."""
    found = set()
    for name in names:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file is not None and Path(file).resolve().is_relative_to(folder):
            found.add(name)
    return found


def import_app(spec: str) -> tuple[UserApp, set[str]]:
    """`load_app(spec)`, and the modules it imported that were not imported before."""
    before = set(sys.modules)
    app = load_app(spec)
    return app, set(sys.modules) - before


class ReloadingEngine:
    """The worker and the router for one app, started again on its new code when its files change.

    `run` is a part of the process (it ends only with an error); `shutdown` stops the worker gracefully.
    """

    def __init__(
        self,
        platform: Platform,
        temporal: TemporalClient,
        settings: Settings,
        spec: str,
        app: UserApp,
        app_modules: set[str],
        *,
        announce: Callable[[str], None],
        restarted: Callable[[UserApp], Awaitable[None]],
    ) -> None:
        self.platform, self.temporal, self.settings = platform, temporal, settings
        self.spec, self.app = spec, app
        module_file = getattr(sys.modules.get(app.name), "__file__", None)
        self.folder = Path(module_file).resolve().parent if module_file else Path.cwd().resolve()
        self.modules = loaded_under(app_modules, self.folder)
        self.announce = announce
        self.restarted = restarted
        self._worker: Worker | None = None
        # The files as last looked at: a change made while a reload runs is found by the next look.
        self._seen: dict[Path, float] = {}

    def _start(self) -> list[asyncio.Future[Any]]:
        components = platform_components(self.platform, self.temporal, self.app)
        worker = build_worker(self.temporal, self.settings, self.app, components.workflows, components.activities)
        tasks: list[asyncio.Future[Any]] = [asyncio.ensure_future(worker.run())]
        tasks += [asyncio.ensure_future(background()) for background in components.background_tasks]
        self._worker = worker
        return tasks

    def _start_new(self) -> list[asyncio.Future[Any]]:
        """The worker on new code; none (said) when it cannot be built, until the next change."""
        try:
            return self._start()
        except Exception as err:
            self.announce(f"reload       the worker cannot start on the new code, fix it and save again: {err}")
            return []

    async def _stop(self, tasks: list[asyncio.Future[Any]]) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            await worker.shutdown()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _changes(self) -> list[Path]:
        """Once files under the folder differ from the last look: which ones (new, changed or removed)."""
        while True:
            await asyncio.sleep(POLL_SECONDS)
            now = await asyncio.to_thread(modified, self.folder)
            seen, self._seen = self._seen, now
            if now != seen:
                return sorted({*now, *seen} - {p for p in now if seen.get(p) == now[p]})

    def _reimport(self) -> UserApp | None:
        """The app on its new code, or None (said, and the old modules put back) when it does not import."""
        kept = {name: sys.modules.pop(name) for name in self.modules if name in sys.modules}
        try:
            app, imported = import_app(self.spec)
        except AppLoadError as err:
            self.announce(f"reload       the app does not load, the worker is left as it is: {err}")
            sys.modules.update(kept)
            return None
        self.modules = loaded_under(imported, self.folder)
        return app

    async def run(self) -> None:
        self._seen = await asyncio.to_thread(modified, self.folder)
        tasks = self._start()
        try:
            while True:
                watch = asyncio.ensure_future(self._changes())
                done, _ = await asyncio.wait([*tasks, watch], return_when=asyncio.FIRST_COMPLETED)
                if watch not in done:
                    watch.cancel()
                    for task in done:
                        task.result()
                    raise RuntimeError("the worker stopped by itself")
                changed = ", ".join(str(path.relative_to(self.folder)) for path in watch.result())
                self.announce(f"reload       {changed} changed")
                app = self._reimport()
                if app is None:
                    continue
                await self._stop(tasks)
                self.app = app
                tasks = self._start_new()
                if tasks:
                    self.announce(f"reload       the worker runs {app.title} again, on its new code")
                    await self.restarted(app)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def shutdown(self) -> None:
        if self._worker is not None:
            await self._worker.shutdown()
