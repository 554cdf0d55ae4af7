"""`orchestrator dev` SIGKILLed mid-burst, the whole process tree at once, and started again at once on the
same data folder: it comes up, and every write it acknowledged before the kill still reaches a run.

The kill takes everything a crash of the machine's user space would: the CLI process, the worker and API
in it, the Temporal dev server and the embedded PostgreSQL (whose postmaster is not a child of the CLI:
pg_ctl detaches it). What they leave (a zombie postmaster not yet reaped, its pid and lock files, ports)
must not keep the second start from coming up.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import psutil
import pytest

from orchestrator.dev.embedded import EmbeddedServerError, TemporalDevServer, free_port
from tests.crash.dev_process import Dev

# `orchestrator dev` takes Temporal's default ports: its tests run one at a time, on one test worker.
pytestmark = [pytest.mark.devserver, pytest.mark.xdist_group("orchestrator-dev")]

SETTLE_SECONDS = 90.0
WRITERS = 8


async def command(http: httpx.AsyncClient, body: dict[str, object]) -> dict[str, object]:
    reply: dict[str, object] = (await http.post("/v1/commands", json=body)).json()
    return reply


async def ran(http: httpx.AsyncClient, session: str, event_ids: set[int]) -> set[int]:
    """The events of `event_ids` that reached a run the app's workflow ran to its end (a run recorded as stopped
    never ran), waiting up to SETTLE_SECONDS for all of them."""
    deadline, reached = time.monotonic() + SETTLE_SECONDS, set[int]()
    while not event_ids <= reached and time.monotonic() < deadline:
        reply = await command(http, {"command": "list_executions", "session_id": session})
        assert reply["status"] == "success", reply
        for execution in reply["executions"]:  # type: ignore[attr-defined]
            if execution.get("status") == "completed":
                reached.update((execution.get("batch") or {}).get("event_ids", []))
        await asyncio.sleep(0.5)
    return reached & event_ids


async def test_dev_killed_mid_burst_starts_again_at_once_and_loses_no_acknowledged_write(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    first = Dev(data_dir, port, tmp_path / "first.log")
    second: Dev | None = None
    try:
        await first.ready()
        acknowledged: list[int] = []
        async with httpx.AsyncClient(base_url=first.url, timeout=10) as http:
            opened = await command(http, {"command": "open_session", "alias": "burst"})
            session = opened["session"]["id"]  # type: ignore[index]
            stop_writing, enough = asyncio.Event(), asyncio.Event()

            async def writer(n: int) -> None:
                i = 0
                while not stop_writing.is_set():
                    body = {
                        "command": "write_object",
                        "session_id": session,
                        "alias": f"burst/{n}/{i}",
                        "value": {"type": "burst"},
                    }
                    try:
                        reply = await command(http, body)
                    except (httpx.HTTPError, ValueError):
                        return  # the platform died under this request: not acknowledged
                    if reply.get("status") == "success":
                        acknowledged.append(int(reply["event_id"]))  # type: ignore[call-overload]
                        if len(acknowledged) >= 300:
                            enough.set()
                    i += 1

            writers = [asyncio.create_task(writer(n)) for n in range(WRITERS)]
            # Mid-burst: some batches have run, others are in their windows or in flight.
            await asyncio.wait_for(enough.wait(), 60)
            first.kill()
            stop_writing.set()
            await asyncio.gather(*writers)

        second = Dev(data_dir, port, tmp_path / "second.log")
        await second.ready()
        # Up means up: still running a few seconds later, and answering.
        await asyncio.sleep(3)
        assert second.process.poll() is None, second.output()

        async with httpx.AsyncClient(base_url=second.url, timeout=10) as http:
            missing = set(acknowledged) - await ran(http, session, set(acknowledged))
        assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged writes reached no run"
    finally:
        for dev in (second, first):
            if dev is not None:
                await dev.stop()


def _dev_servers_on(data_dir: Path) -> list[psutil.Process]:
    """Temporal dev servers running (not zombies) on the data folder's SQLite file."""
    wanted = str((data_dir / "temporal.sqlite").resolve())
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = process.info.get("cmdline") or []
        if process.info.get("status") != psutil.STATUS_ZOMBIE and "start-dev" in cmdline and wanted in cmdline:
            found.append(process)
    return found


async def test_dev_started_again_after_its_own_process_alone_was_killed_stops_the_server_it_abandoned(
    tmp_path: Path,
) -> None:
    """A SIGKILL of the CLI process alone (an OOM kill, `kill -9 PID`) leaves the Temporal dev server, which
    runs in a session of its own, holding the SQLite file. The next start stops that server rather than run
    a second one on the same file, and the writes acknowledged before the kill still reach runs."""
    data_dir, port = tmp_path / "data", free_port()
    first = Dev(data_dir, port, tmp_path / "first.log")
    second: Dev | None = None
    try:
        await first.ready()
        async with httpx.AsyncClient(base_url=first.url, timeout=10) as http:
            opened = await command(http, {"command": "open_session", "alias": "orphan"})
            session = opened["session"]["id"]  # type: ignore[index]
            body = {"command": "write_object", "session_id": session, "alias": "burst/1", "value": {"type": "t"}}
            written = await command(http, body)
        abandoned = _dev_servers_on(data_dir)
        assert len(abandoned) == 1
        first.process.kill()
        first.process.wait()
        assert abandoned[0].is_running(), "the kill of the CLI alone leaves its dev server running"

        second = Dev(data_dir, port, tmp_path / "second.log")
        await second.ready()
        running = _dev_servers_on(data_dir)
        assert [p.pid for p in running] != [abandoned[0].pid] and len(running) == 1, running

        async with httpx.AsyncClient(base_url=second.url, timeout=10) as http:
            event_id = int(written["event_id"])  # type: ignore[call-overload]
            assert await ran(http, session, {event_id}) == {event_id}
    finally:
        for dev in (second, first):
            if dev is not None:
                await dev.stop()
    assert not _dev_servers_on(data_dir), "a stopped platform leaves no dev server behind"


async def test_a_second_platform_on_a_data_folder_in_use_is_refused_and_leaves_the_first_running(
    tmp_path: Path,
) -> None:
    """Two dev servers on one SQLite file corrupt each other's state: a start on a folder whose server's
    platform still runs (here, this very process) is refused with a message, and the first server stays."""
    first = await TemporalDevServer(tmp_path, ui=False).start()
    try:
        with pytest.raises(EmbeddedServerError, match="belongs to a platform still running"):
            await TemporalDevServer(tmp_path, ui=False).start()
        assert [p.pid for p in _dev_servers_on(tmp_path)] == [first.pid]
    finally:
        await first.stop()
    assert not _dev_servers_on(tmp_path)


def _postmaster(data_dir: Path) -> psutil.Process:
    return psutil.Process(int((data_dir / "postgres" / "postmaster.pid").read_text().split()[0]))


async def _said(dev: Dev, line: str, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while line not in dev.output():
        assert time.monotonic() < deadline, f"never said {line!r}:\n{dev.output()}"
        assert dev.process.poll() is None, dev.output()
        await asyncio.sleep(0.2)


async def test_dev_starts_its_embedded_servers_again_when_one_is_killed_and_loses_no_write(tmp_path: Path) -> None:
    """`orchestrator dev` owns its embedded PostgreSQL and Temporal dev server: one killed under it (an OOM
    kill, `kill -9` by hand) is started again on its data, and the platform goes on with every write."""
    data_dir, port = tmp_path / "data", free_port()
    dev = Dev(data_dir, port, tmp_path / "dev.log")
    try:
        await dev.ready()
        async with httpx.AsyncClient(base_url=dev.url, timeout=10) as http:
            opened = await command(http, {"command": "open_session", "alias": "kept"})
            session = str(opened["session"]["id"])  # type: ignore[index]
            written: set[int] = set()

            async def write(n: int) -> None:
                body: dict[str, object] = {
                    "command": "write_object",
                    "session_id": session,
                    "alias": f"burst/{n}",
                    "value": {"type": "t"},
                }
                reply = await command(http, body)
                assert reply["status"] == "success", reply
                written.add(int(reply["event_id"]))  # type: ignore[call-overload]

            await write(1)
            postmaster = _postmaster(data_dir)
            postmaster.kill()  # the postmaster alone: its backends see it gone and exit
            await _said(dev, "postgres     running again")
            assert _postmaster(data_dir).pid != postmaster.pid
            await write(2)

            [temporal] = _dev_servers_on(data_dir)
            temporal.kill()
            await _said(dev, "temporal     running again")
            assert [p.pid for p in _dev_servers_on(data_dir)] != [temporal.pid]
            await write(3)
            assert await ran(http, session, written) == written, dev.output()
        assert "postgres     stopped running; starting it again on its data" in dev.output()
    finally:
        await dev.stop()
    assert not _dev_servers_on(data_dir), "a stopped platform leaves no dev server behind"
    assert not (data_dir / "postgres" / "postmaster.pid").exists(), "nor its PostgreSQL running"
