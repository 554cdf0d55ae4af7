"""The testing kit as a pytest plugin (the `pytest11` entry point `orchestrator`): a `harness` fixture, and
pytest-asyncio's `auto` mode, so a folder holding only an app and its test runs with a bare `pytest`.

The fixture runs the app named by the nearest `@pytest.mark.orchestrator_app("module or path.py")`, else by
the `orchestrator_app` ini option, else the module `app` (what `orchestrator new` writes), on a `Harness`:
an embedded PostgreSQL and Temporal's time-skipping server of its own, for one test. The mode is set only
where nothing chose one (no `--asyncio-mode`, `-o asyncio_mode=`, or `asyncio_mode` in the config file), and
then the warning about an unset fixture loop scope is not shown: the fixture's loop is the test's,
function-scoped.

Loaded by every pytest run where the package is installed, so it imports nothing heavy until a test asks
for the fixture.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from orchestrator.testing import Harness

DEFAULT_APP = "app"
MARKER = "orchestrator_app"
_UNSET_LOOP_SCOPE = r'The configuration option "asyncio_default_fixture_loop_scope" is unset'


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(MARKER, f"the app the `harness` fixture runs (default: {DEFAULT_APP})", default=None)


def _mode_chosen(config: pytest.Config) -> bool:
    """Whether the run or its config file already says which asyncio mode to use."""
    if getattr(config.option, "asyncio_mode", None) is not None:
        return True
    if any(o.startswith("asyncio_mode=") for o in getattr(config.option, "override_ini", None) or ()):
        return True
    path = config.inipath
    return path is not None and "asyncio_mode" in path.read_text(encoding="utf-8", errors="replace")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f'{MARKER}("module"): the app the `harness` fixture runs')
    if hasattr(config.option, "asyncio_mode") and not _mode_chosen(config):
        config.option.asyncio_mode = "auto"
        # Shown by pytest-asyncio's own configure, which runs after this one inside pytest's warning filters.
        warnings.filterwarnings("ignore", message=_UNSET_LOOP_SCOPE, category=pytest.PytestDeprecationWarning)


def app_spec(request: pytest.FixtureRequest) -> str:
    """The app a test's harness runs: its marker, the ini option, or `app`."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is not None and marker.args:
        return str(marker.args[0])
    configured = request.config.getini(MARKER)
    return str(configured) if configured else DEFAULT_APP


async def _harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    """The platform running the test's app: `harness.client`, `harness.settle()`, `harness.sleep(s)`."""
    from orchestrator.app_loader import AppLoadError
    from orchestrator.testing import Harness

    spec = app_spec(request)
    try:
        harness = Harness(app=spec)
    except AppLoadError as err:
        pytest.fail(f"{err}; name the app with @pytest.mark.{MARKER}('module') or the {MARKER} ini option")
    async with harness:
        yield harness


def _fixture() -> Any:
    try:
        import pytest_asyncio
    except ImportError:  # the `testing` extra is not installed: say so when the fixture is asked for

        @pytest.fixture(name="harness")
        def missing() -> Any:
            pytest.fail("the harness fixture needs pytest-asyncio: install orchestrator[testing]")

        return missing
    return pytest_asyncio.fixture(_harness, name="harness")


harness = _fixture()
