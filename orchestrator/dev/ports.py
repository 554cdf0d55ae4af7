"""The ports `orchestrator dev` listens on, settled before anything starts.

Owns the choice and the check: the HTTP API's port is the one asked for (`--http-port`,
`ORCHESTRATOR_HTTP_PORT`), and a taken one is refused at once, naming how to choose another, instead of
after PostgreSQL and Temporal have started. The embedded Temporal's two ports (its frontend, 7233, and its
UI, `ORCHESTRATOR_TEMPORAL_UI_PORT`, 8233) are wishes when left at their defaults: a taken one is replaced
by a free one, and the ports used are remembered in the data folder (`ports.json`), so the UI's address
stays the same from one start to the next while its port is free. A UI port set explicitly is a demand,
refused like the API's when taken.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path

from orchestrator.config import Settings
from orchestrator.plain_http import PORTS_FILE, read_ports

TEMPORAL_DEFAULT_PORT = 7233
TEMPORAL_HOST = "127.0.0.1"


class PortTaken(Exception):
    """A port `orchestrator dev` must have is in use; the message names the flag or variable that moves it."""


@dataclass(frozen=True)
class DevPorts:
    http: int
    # None where the settings name an external Temporal.
    temporal: int | None = None
    temporal_ui: int | None = None
    # Whether the UI's port was set explicitly (a demand); the frontend's always is a wish.
    ui_demanded: bool = False


def port_is_free(port: int, host: str) -> bool:
    """Whether `port` can be listened on at `host`, as the servers bind it (a port whose last connections
    linger in TIME_WAIT after a restart is free to them)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _free_port(host: str, avoid: set[int]) -> int:
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port: int = sock.getsockname()[1]
        if port not in avoid:
            return port


def _remembered(data_dir: Path) -> dict[str, int]:
    return {k: v for k, v in read_ports(data_dir).items() if isinstance(v, int)}


def remember(data_dir: Path, **ports: int | str | None) -> None:
    """The embedded Temporal's ports, for the data folder's next start (`temporal`, `temporal_ui`), and the API's
    base URL while it serves (`api`, which `orchestrator call`, `status` and `events` go to: None once stopped);
    what is not given is kept."""
    data_dir.mkdir(parents=True, exist_ok=True)
    kept = {k: v for k, v in {**read_ports(data_dir), **ports}.items() if v is not None}
    (data_dir / PORTS_FILE).write_text(json.dumps(kept, indent=2) + "\n", encoding="utf-8")


def _wished(name: str, wish: int, remembered: dict[str, int], avoid: set[int]) -> int:
    """The port used last time when it is free, else the wish when free, else any free port."""
    for port in (remembered.get(name), wish):
        if port is not None and port not in avoid and port_is_free(port, TEMPORAL_HOST):
            return port
    return _free_port(TEMPORAL_HOST, avoid)


def plan_ports(settings: Settings, data_dir: Path) -> DevPorts:
    """The ports to use, or `PortTaken` naming every port that is taken and how to move it.

    Checked now, not held: another process may still take a port before its server binds it; the embedded
    Temporal then moves a wished port to a free one (`TemporalDevServer.wished`), and dev remembers where.
    """
    taken = []
    http = settings.http_port
    if http and not port_is_free(http, settings.http_host):
        taken.append(
            f"the HTTP API's port {http} on {settings.http_host} is in use: choose another with --http-port N"
            " or ORCHESTRATOR_HTTP_PORT (0 picks a free one)"
        )
    if settings.temporal_address:
        if taken:
            raise PortTaken("; ".join(taken))
        return DevPorts(http)
    remembered = _remembered(data_dir)
    temporal = _wished("temporal", TEMPORAL_DEFAULT_PORT, remembered, {http})
    demanded = "temporal_ui_port" in settings.model_fields_set
    if demanded:
        ui = settings.temporal_ui_port
        if not port_is_free(ui, TEMPORAL_HOST) or ui in (http, temporal):
            taken.append(
                f"the Temporal UI's port {ui} is in use: choose another with ORCHESTRATOR_TEMPORAL_UI_PORT"
                " (or unset it, and a free one is used and remembered)"
            )
    else:
        ui = _wished("temporal_ui", settings.temporal_ui_port, remembered, {http, temporal})
    if taken:
        raise PortTaken("; ".join(taken))
    remember(data_dir, temporal=temporal, temporal_ui=ui)
    return DevPorts(http, temporal, ui, demanded)


def running_temporal_address(data_dir: Path) -> str | None:
    """The embedded Temporal of the `orchestrator dev` on `data_dir` (its port remembered here), when something
    listens there; None otherwise."""
    port = _remembered(data_dir).get("temporal")
    if port is None:
        return None
    try:
        with socket.create_connection((TEMPORAL_HOST, port), timeout=0.5):
            return f"{TEMPORAL_HOST}:{port}"
    except OSError:
        return None
