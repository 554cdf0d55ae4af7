"""`orchestrator dev`'s ports, settled before anything starts: a taken API port is refused naming how to
move it, and the embedded Temporal's fallback ports are remembered in the data folder."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.config import Settings
from orchestrator.dev.ports import TEMPORAL_DEFAULT_PORT, PortTaken, plan_ports, port_is_free

# `orchestrator dev` takes Temporal's default ports: its tests run one at a time, on one test worker.
pytestmark = pytest.mark.xdist_group("orchestrator-dev")


CLI = str(Path(sys.executable).parent / "orchestrator")


@pytest.fixture
def listening() -> Iterator[list[socket.socket]]:
    """Listening sockets a test opens to take ports, closed after it."""
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def take(opened: list[socket.socket], port: int = 0) -> int:
    """Listen on `port` (0: any free one). As servers bind (SO_REUSEADDR): the connections of a `dev` that
    ran just before on the port linger in TIME_WAIT, and a plain bind would find it taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    opened.append(sock)  # closed by the fixture even when the bind fails
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return int(sock.getsockname()[1])


def test_a_taken_api_port_is_refused_naming_the_flag_and_the_variable(
    tmp_path: Path, listening: list[socket.socket]
) -> None:
    port = take(listening)
    with pytest.raises(PortTaken) as refused:
        plan_ports(Settings(http_port=port, temporal_address="elsewhere:7233"), tmp_path)
    assert f"port {port}" in str(refused.value)
    assert "--http-port" in str(refused.value) and "ORCHESTRATOR_HTTP_PORT" in str(refused.value)


def test_a_taken_ui_port_set_explicitly_is_refused_naming_its_variable(
    tmp_path: Path, listening: list[socket.socket]
) -> None:
    ui = take(listening)
    with pytest.raises(PortTaken, match="ORCHESTRATOR_TEMPORAL_UI_PORT"):
        plan_ports(Settings(http_port=0, temporal_ui_port=ui), tmp_path)
    assert not (tmp_path / "ports.json").exists()


def test_the_temporal_fallback_ports_are_remembered_for_the_data_folder(
    tmp_path: Path, listening: list[socket.socket]
) -> None:
    # The defaults are taken (by this test, or by a platform already running on the machine).
    for port in (TEMPORAL_DEFAULT_PORT, 8233):
        if port_is_free(port, "127.0.0.1"):
            take(listening, port)
    first = plan_ports(Settings(http_port=0), tmp_path)
    assert first.temporal not in (None, TEMPORAL_DEFAULT_PORT) and first.temporal_ui not in (None, 8233)

    again = plan_ports(Settings(http_port=0), tmp_path)
    assert again == first  # the same UI address, start after start

    # Once a remembered port is taken, another is found and remembered in its place.
    assert first.temporal_ui is not None
    take(listening, first.temporal_ui)
    moved = plan_ports(Settings(http_port=0), tmp_path)
    assert moved.temporal == first.temporal and moved.temporal_ui != first.temporal_ui
    assert plan_ports(Settings(http_port=0), tmp_path) == moved


async def test_dev_refuses_a_taken_port_before_starting_anything(
    tmp_path: Path, listening: list[socket.socket]
) -> None:
    port = take(listening)
    process = await asyncio.create_subprocess_exec(
        CLI,
        "dev",
        "--data-dir",
        str(tmp_path / "data"),
        "--http-port",
        str(port),
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)

    assert process.returncode == 2
    assert f"the HTTP API's port {port} on 127.0.0.1 is in use" in err.decode()
    assert "--http-port" in err.decode()
    assert not (tmp_path / "data").exists(), "something was started or written before the check"
    assert "Ready." not in out.decode()


async def test_a_dev_server_whose_chosen_port_is_taken_before_it_binds_chooses_again(
    listening: list[socket.socket], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race of a free port: chosen, then taken by another process before the server binds it. The server
    exits at once; it chooses another port and starts, rather than fail whoever started it."""
    from orchestrator.dev import embedded

    taken = take(listening)
    choices = iter([taken])
    monkeypatch.setattr(embedded, "free_port", lambda host="127.0.0.1": next(choices, None) or _any_port())
    server = embedded.TemporalDevServer(tmp_path / "temporal", ui=False)
    await server.start()
    try:
        assert server.port != taken
        assert b"address already in use" in (tmp_path / "temporal" / "temporal.log").read_bytes()
    finally:
        await server.stop()


async def test_a_wished_port_taken_before_the_server_binds_it_is_replaced_and_kept_from_then_on(
    listening: list[socket.socket], tmp_path: Path
) -> None:
    """Two `orchestrator dev` started at once both find Temporal's port free and both give it to their server:
    the one that loses the bind moves to a free port instead of exiting. Once started, a server keeps its ports
    (started again after a crash, its clients know them)."""
    from orchestrator.dev import embedded

    taken = take(listening)
    server = embedded.TemporalDevServer(tmp_path / "temporal", port=taken, ui=False, wished=(True, False))
    await server.start()
    try:
        assert server.port not in (None, taken)
        assert server.wished == (False, False)
    finally:
        await server.stop()

    demanded = embedded.TemporalDevServer(tmp_path / "demanded", port=taken, ui=False)
    with pytest.raises(embedded.EmbeddedServerError, match="address already in use"):
        await demanded.start()


def _any_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
