"""One command over HTTP with the standard library only: what `orchestrator call` sends when the API is a URL
away, so a call loads no HTTP client, no pydantic and no asyncio (about 0.1 s instead of 0.7 s of imports).

Owns where the API is by default (`ORCHESTRATOR_HTTP_HOST`, `ORCHESTRATOR_HTTP_PORT`, else where the running
`orchestrator dev` said it is, `ORCHESTRATOR_API_TOKEN`, read as `Settings` reads them: names in any case, the
same defaults) and the one
POST. The reply is the API's JSON as it is; anything else that answers is reported as an `internal_error`
reply, as the Python client's HTTP transport reports it. A transport failure raises `Unreachable`.
"""

from __future__ import annotations

import http.client
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from orchestrator.core.errors import CommandError
from orchestrator.core.json_checks import MAX_JSON_DEPTH, json_trouble

# As the Python client's default, and the settings' defaults for the HTTP door.
TIMEOUT_SECONDS = 30.0
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8700
# As the settings' `data_dir`; the file in it where `orchestrator dev` remembers its ports and its API's address.
DEFAULT_DATA_DIR = ".orchestrator"
PORTS_FILE = "ports.json"
MAX_PORT = 65535


class Unreachable(Exception):
    """The API did not answer: no connection, a timeout, a connection cut before the reply."""


class BadSetting(Exception):
    """An environment variable holds what its setting cannot be (a port that is not a number)."""


def api_url(host: str, port: int) -> str:
    """The base URL of an API listening on `host:port` (a wildcard host is reached on loopback)."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def _setting(environ: Mapping[str, str], name: str) -> str | None:
    # pydantic-settings matches names in any case unless told otherwise; so does this.
    wanted = f"orchestrator_{name}"
    found = [value for key, value in environ.items() if key.lower() == wanted]
    return found[-1] if found else None


def read_ports(data_dir: str | Path) -> dict[str, Any]:
    """What `orchestrator dev` remembers in the data folder (`ports.json`): its Temporal's ports, and its API's base
    URL while it serves (`api`); empty when there is nothing to read."""
    try:
        found = json.loads((Path(data_dir) / PORTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def default_api(host: str | None, port: int | None, data_dir: str | Path) -> str:
    """Where the API is when no URL is given: `host` and `port` when either is set, else the API of the `orchestrator
    dev` running on `data_dir` (wherever `--http-port` put it), else the default port."""
    if host is None and port is None:
        running = read_ports(data_dir).get("api")
        if isinstance(running, str) and running.startswith("http"):
            return running
    return api_url(DEFAULT_HOST if host is None else host, DEFAULT_PORT if port is None else port)


def door_from_env(environ: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """The API's base URL (`default_api`, the data folder `ORCHESTRATOR_DATA_DIR` else `.orchestrator`) and bearer
    token as the settings name them (token None when unset or empty)."""
    environ = os.environ if environ is None else environ
    port_text = _setting(environ, "http_port")
    try:
        port = None if port_text is None else int(port_text.strip())
    except ValueError:
        raise BadSetting(f"ORCHESTRATOR_HTTP_PORT: {port_text!r} is not a port number") from None
    if port is not None and not 0 <= port <= MAX_PORT:
        raise BadSetting(f"ORCHESTRATOR_HTTP_PORT: {port} is not a port number (0 to {MAX_PORT})")
    url = default_api(_setting(environ, "http_host"), port, _setting(environ, "data_dir") or DEFAULT_DATA_DIR)
    return url, _setting(environ, "api_token") or None


def checked_url(url: str, named: str) -> str:
    """`url` when it can name an API (http or https, a host, a port in range); else `BadSetting` naming where it
    was given (`--url`): a URL no retry can reach is bad usage, not an API out of reach for now."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (read for its check: a port out of range or not a number raises)
    except ValueError as err:
        raise BadSetting(f"{named}: {url!r} is not a URL ({err})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadSetting(f"{named}: {url!r} is not an http:// or https:// URL with a host")
    return url


def encoded_body(body: Any) -> bytes | dict[str, Any]:
    """`body` as the JSON text the API reads; or, when JSON has no form for it (a set, a date, NaN), the
    refusal the API answers such a body with (`invalid_request`, the field named): a client's bad input is a
    reply, never an exception. A lone surrogate goes escaped, for the API to refuse by name."""
    try:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        trouble = json_trouble(body, MAX_JSON_DEPTH) if isinstance(body, dict) else None
        return CommandError("invalid_request", trouble or "body: JSON has no form for it").reply()
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(body, separators=(",", ":")).encode()


def authorization(token: str | None) -> dict[str, str]:
    """The `Authorization` header that carries `token` (none for no token), without the whitespace around it: a
    secret read from a file or a `.env` line keeps its line end, which no header can carry, and the API strips
    what surrounds a bearer token too. ValueError, which never shows the token, when a character no header can
    carry is left in it (a control character, one past Latin-1): a traceback of the failed send would print it."""
    token = (token or "").strip()
    if not token:
        return {}
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 or ord(ch) > 0xFF for ch in token):
        raise ValueError(
            "token: holds a character no HTTP header can carry (a control character, or one past Latin-1); the"
            " token is not shown"
        )
    return {"Authorization": f"Bearer {token}"}


def post_command(url: str, token: str | None, body: Any, timeout: float = TIMEOUT_SECONDS) -> dict[str, Any]:
    """POST `body` to `url`'s `/v1/commands` and answer the reply."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Unreachable(f"{url!r} is not an http:// or https:// URL")
    connection_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    path = parts.path.rstrip("/") + "/v1/commands"
    data = encoded_body(body)
    if isinstance(data, dict):
        return data
    try:
        headers = {"Content-Type": "application/json", "Accept": "application/json", **authorization(token)}
    except ValueError as err:
        return CommandError("invalid_request", str(err)).reply()
    connection = connection_type(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request("POST", path, body=data, headers=headers)
        response = connection.getresponse()
        raw = response.read()
    except (OSError, http.client.HTTPException) as err:  # refused, reset, timed out, cut short
        raise Unreachable(repr(err)) from None
    finally:
        connection.close()
    return command_reply(raw, response.status, f"{parts.scheme}://{parts.netloc}{path}")


def command_reply(raw: bytes, status: int, url: str) -> dict[str, Any]:
    """The API's reply in `raw`; anything else that answered (a proxy, a wrong URL) reported as a reply, not
    a crash (both HTTP doors)."""
    try:
        reply = json.loads(raw)
    except ValueError:
        reply = None
    if isinstance(reply, dict) and "status" in reply:
        return reply
    return {
        "status": "error",
        "error": "internal_error",
        "message": f"HTTP {status} from {url} without a command reply",
    }
