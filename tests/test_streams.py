"""Connection listeners: `GET /v1/sessions/{id}/stream` answers Server-Sent Events, batch by batch.

Against the real HTTP server and PostgreSQL, with no Temporal at all: a stream starts no run and no lane.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import pytest
from pydantic import SecretStr

from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door import streams
from orchestrator.door.api import create_app
from orchestrator.platform import Platform


@pytest.fixture
async def api(platform: Platform, settings: Settings) -> AsyncIterator[tuple[str, Platform]]:
    async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as url:
        yield url, platform


async def session(platform: Platform) -> str:
    return str((await platform.command({"command": "open_session"}))["session"]["id"])


async def write(platform: Platform, sid: str, alias: str, client: str | None = None) -> int:
    body: dict[str, Any] = {"command": "write_object", "session_id": sid, "alias": alias, "value": {"type": "t"}}
    if client is not None:
        body["client"] = client
    reply = await platform.command(body)
    assert reply["status"] == "success", reply
    return int(reply["event_id"])


def query(**params: Any) -> str:
    return urlencode({k: (v if isinstance(v, str) else json.dumps(v)) for k, v in params.items() if v is not None})


@asynccontextmanager
async def opened(url: str, sid: str, headers: dict[str, str] | None = None, **params: Any) -> AsyncIterator[Any]:
    """An open stream: yields a function that answers its next SSE message (`id`, `event`, `data`)."""
    async with (
        httpx.AsyncClient(base_url=url, timeout=30) as http,
        http.stream("GET", f"/v1/sessions/{sid}/stream?{query(**params)}", headers=headers) as response,
    ):
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.aiter_lines()

        async def next_message(within: float = 10.0) -> dict[str, Any]:
            """The next message with an event, with the comments that came before it."""
            message: dict[str, Any] = {}
            while True:
                line = await asyncio.wait_for(anext(lines), within)
                if line == "":
                    if "event" in message:
                        return message
                    continue
                if line.startswith(":"):
                    message.setdefault("comments", []).append(line)
                    continue
                name, _, value = line.partition(": ")
                message[name] = json.loads(value) if name == "data" else value

        yield next_message


async def test_writes_arrive_as_batches_by_window_and_distinct_by(api: tuple[str, Platform]) -> None:
    url, platform = api
    sid = await session(platform)
    flt = {"types": ["object.written"], "aliases": ["cells/**"]}
    async with opened(url, sid, filter=flt, batch={"window_seconds": 1, "distinct_by": "object.alias"}) as next_message:
        ids = [await write(platform, sid, f"cells/{n % 2}") for n in range(6)]
        await write(platform, sid, "elsewhere/1")
        message = await next_message()
    assert message["event"] == "batch"
    data = message["data"]
    assert (data["first_id"], data["last_id"], data["count"]) == (ids[0], ids[-1], 2)
    assert [e["id"] for e in data["events"]] == ids[-2:], "the newest per alias"
    assert message["id"] == str(ids[-1])


async def test_a_clients_own_writes_are_left_out(api: tuple[str, Platform]) -> None:
    url, platform = api
    sid = await session(platform)
    async with opened(url, sid, filter={"aliases": ["w/**"]}, client="widget-1") as next_message:
        await write(platform, sid, "w/mine", client="widget-1")
        other = await write(platform, sid, "w/theirs", client="widget-2")
        message = await next_message()
    assert [e["id"] for e in message["data"]["events"]] == [other]


async def test_a_reconnect_with_last_event_id_gets_exactly_what_it_missed_once(api: tuple[str, Platform]) -> None:
    url, platform = api
    sid = await session(platform)
    async with opened(url, sid, filter={"aliases": ["r/**"]}) as next_message:
        first = await write(platform, sid, "r/1")
        seen = await next_message()
    assert seen["data"]["last_id"] == first
    missed = [await write(platform, sid, f"r/{n}") for n in range(2, 6)]
    got: list[int] = []
    async with opened(url, sid, headers={"Last-Event-ID": seen["id"]}, filter={"aliases": ["r/**"]}) as next_message:
        while len(got) < len(missed):
            got += [e["id"] for e in (await next_message())["data"]["events"]]
        later = await write(platform, sid, "r/later")
        got += [e["id"] for e in (await next_message())["data"]["events"]]
    assert got == [*missed, later], "exactly the missed events, once, then the stream goes on"
    # `?after=` resumes the same way.
    async with opened(url, sid, after=str(first), filter={"aliases": ["r/**"]}) as next_message:
        assert (await next_message())["data"]["first_id"] == missed[0]


async def test_without_a_position_the_stream_starts_at_the_sessions_end(api: tuple[str, Platform]) -> None:
    url, platform = api
    sid = await session(platform)
    await write(platform, sid, "old/1")
    async with opened(url, sid) as next_message:
        new = await write(platform, sid, "new/1")
        assert [e["id"] for e in (await next_message())["data"]["events"]] == [new]


async def test_a_stream_opened_at_the_end_says_where_so_a_drop_before_its_first_batch_loses_nothing(
    api: tuple[str, Platform],
) -> None:
    """The opening message carries the position as an `id` without data: an EventSource (or any client keeping
    `Last-Event-ID`) dropped before its first batch resumes from there, not from a later end."""
    url, platform = api
    sid = await session(platform)
    end = await write(platform, sid, "old/1")
    async with (
        httpx.AsyncClient(base_url=url, timeout=30) as http,
        http.stream("GET", f"/v1/sessions/{sid}/stream") as response,
    ):
        lines = response.aiter_lines()
        opening = [await anext(lines) for _ in range(3)]
    assert opening == [": stream open", f"id: {end}", ""], "an id alone is no event: it only sets Last-Event-ID"
    missed = await write(platform, sid, "new/1")
    async with opened(url, sid, headers={"Last-Event-ID": opening[1].removeprefix("id: ")}) as next_message:
        assert [e["id"] for e in (await next_message())["data"]["events"]] == [missed]


async def test_quiet_streams_get_heartbeat_comments(api: tuple[str, Platform], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streams, "HEARTBEAT_SECONDS", 0.3)
    url, platform = api
    sid = await session(platform)
    async with opened(url, sid) as next_message:
        await asyncio.sleep(0.5)
        new = await write(platform, sid, "x/1")
        message = await next_message()
    assert ": heartbeat" in message["comments"]
    assert [e["id"] for e in message["data"]["events"]] == [new]


# A condition's value nested past the depth a command's JSON may have.
DEEP = {"path": "type", "op": "in", "value": json.loads("[" * 150 + "]" * 150)}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"filter": "{not json"}, "filter"),
        ({"filter": {"types": "object.*"}}, "filter.types"),
        ({"filter": {"colour": 1}}, "filter.colour"),
        ({"batch": {"window_seconds": 301}}, "batch.window_seconds"),
        ({"batch": {"max_events": 0}}, "batch.max_events"),
        ({"filter": {"types": ["object.**"], "where": [{"path": "item.role", "op": "exists"}]}}, "filter.where.0.path"),
        ({"after": "-3"}, "after"),
        ({"client": "x" * 200}, "client"),
        ({"fitler": {"types": ["object.**"]}}, "fitler"),  # a typo would have streamed everything
        ({"after": str(2**63)}, "after"),  # past any event id: it failed inside the stream, after its 200
        ({"after": "²"}, "after"),
        # A type no event can have, as save_listener refuses it: the stream would sit idle for good.
        ({"filter": {"types": ["object.writen"]}}, "filter.types.0: 'object.writen' matches no event type"),
        # Places for events that have none, as save_listener refuses them: nothing would ever come.
        ({"filter": {"types": ["execution.ended"], "aliases": ["x/**"]}}, "filter.aliases: no event of types"),
        # As /v1/commands refuses a body: nesting past its depth, NaN and Infinity, what the store cannot hold.
        ({"filter": "[" * 3000 + "]" * 3000}, "filter: JSON nested deeper than 100 levels"),
        ({"batch": "[" * 3000 + "]" * 3000}, "batch: JSON nested deeper than 100 levels"),
        ({"filter": {"types": ["object.**"], "where": [DEEP]}}, "filter: JSON nested deeper than 100 levels"),
        ({"batch": '{"window_seconds": NaN}'}, "batch: not valid JSON (NaN is not valid JSON)"),
        ({"filter": '{"where": [{"path": "type", "op": "lt", "value": Infinity}]}'}, "filter: not valid JSON"),
        ({"filter": {"where": [{"path": "type", "op": "eq", "value": "a\x00"}]}}, "filter.where.0.value: a NUL"),
        ({"filter": {"where": [{"path": "type", "op": "eq", "value": "\ud800"}]}}, "filter.where.0.value: a lone"),
        ({"batch": {"distinct_by": "object.\x00"}}, "batch.distinct_by: a NUL"),
    ],
)
async def test_bad_parameters_are_refused_before_the_stream_starts(
    api: tuple[str, Platform], params: dict[str, Any], field: str
) -> None:
    url, platform = api
    sid = await session(platform)
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.get(f"/v1/sessions/{sid}/stream?{query(**params)}")
    assert response.status_code == 400
    reply = response.json()
    assert (reply["status"], reply["error"]) == ("error", "invalid_request")
    assert reply["message"].startswith(field), reply


async def test_a_data_path_the_declared_type_can_never_hold_is_refused_as_save_listener_refuses_it(
    api: tuple[str, Platform],
) -> None:
    url, platform = api
    schema = {"type": "object", "properties": {"total": {"type": "number"}}, "additionalProperties": False}
    await platform.command({"command": "save_event_type", "name": "order.placed", "schema": schema})
    sid = await session(platform)
    where = [{"path": "data.nope", "op": "exists"}]
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.get(f"/v1/sessions/{sid}/stream?{query(filter={'types': ['order.*'], 'where': where})}")
    assert response.status_code == 400
    assert response.json()["message"].startswith("filter.where.0.path"), response.text
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.get(f"/v1/sessions/{sid}/stream?{query(filter={'types': ['ordr.*']})}")
    assert response.status_code == 400
    assert response.json()["message"] == (
        "filter.types.0: 'ordr.*' matches no event type, the platform's nor the app's; did you mean 'order.*'?"
    )


async def test_an_unknown_session_is_404(api: tuple[str, Platform]) -> None:
    url, _ = api
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.get("/v1/sessions/ses_none/stream")
    assert response.status_code == 404 and response.json()["error"] == "not_found"


@pytest.mark.parametrize(
    ("sid", "message"),
    [
        ("ses_%00", "session_id: a NUL character (\\u0000) cannot be stored"),
        ("s" * 65, "session_id: String should have at most 64 characters"),
    ],
)
async def test_a_session_id_no_session_can_have_is_refused_as_the_commands_refuse_it(
    api: tuple[str, Platform], sid: str, message: str
) -> None:
    url, _ = api
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.get(f"/v1/sessions/{sid}/stream")
    assert response.status_code == 400, response.text
    assert response.json() == {"status": "error", "error": "invalid_request", "message": message}


async def test_a_stream_ends_when_its_session_is_deleted(
    api: tuple[str, Platform], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streams, "POLL_SECONDS", 0.3)  # a deletion notifies no stream: it is seen on the next read
    url, platform = api
    sid = await session(platform)
    async with (
        httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(10, read=None)) as http,
        http.stream("GET", f"/v1/sessions/{sid}/stream") as response,
    ):
        lines = (line async for line in response.aiter_lines() if line)
        assert await anext(lines) == ": stream open"
        reply = await platform.command({"command": "delete_session", "session_id": sid})
        assert reply["status"] == "success", reply

        async def rest() -> list[str]:
            return [line async for line in lines]

        tail = await asyncio.wait_for(rest(), 5)
    assert tail[-2:] == ["event: closed", 'data: {"reason": "the session was deleted"}'], tail


async def test_a_head_request_answers_the_streams_headers_and_ends(api: tuple[str, Platform]) -> None:
    # HEAD is what a GET answers without its body: no stream is opened, so the response ends and the keep-alive
    # connection it came on answers the next request (an open-ended stream behind a HEAD held it for ever).
    url, platform = api
    sid = await session(platform)
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        head = await http.head(f"/v1/sessions/{sid}/stream")
        assert head.status_code == 200
        assert head.headers["content-type"].startswith("text/event-stream")
        reply = await http.post("/v1/commands", json={"command": "list_listeners"})
        assert reply.json()["status"] == "success"
        bad = await http.head(f"/v1/sessions/{sid}/stream?after=x")
        assert bad.status_code == 400, "a HEAD is refused what its GET is refused"
        assert (await http.head("/v1/sessions/ses_nope/stream")).status_code == 404


async def test_the_token_is_required_as_a_header_or_an_access_token_parameter(
    platform: Platform, settings: Settings
) -> None:
    guarded = settings.model_copy(update={"api_token": SecretStr("s3cret")})
    sid = await session(platform)
    async with serve_api(create_app(platform, guarded), "127.0.0.1", 0) as url:
        async with httpx.AsyncClient(base_url=url) as http:
            assert (await http.get(f"/v1/sessions/{sid}/stream")).status_code == 401
            wrong = await http.get(f"/v1/sessions/{sid}/stream?access_token=nope")
            assert wrong.status_code == 401
            # /v1/commands takes the header only: a token in a URL is for EventSource alone.
            command = await http.post("/v1/commands?access_token=s3cret", json={"command": "list_listeners"})
            assert command.status_code == 401
        async with opened(url, sid, access_token="s3cret") as next_message:
            new = await write(platform, sid, "t/1")
            assert [e["id"] for e in (await next_message())["data"]["events"]] == [new]
        async with opened(url, sid, headers={"Authorization": "Bearer s3cret"}) as next_message:
            new = await write(platform, sid, "t/2")
            assert [e["id"] for e in (await next_message())["data"]["events"]] == [new]


async def test_a_reader_that_stops_reading_is_let_go_rather_than_buffered_for(
    api: tuple[str, Platform], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(streams, "SLOW_READER_SECONDS", 1.0)
    caplog.set_level(logging.INFO, logger=streams.__name__)
    url, platform = api
    sid = await session(platform)
    host, port = urlsplit(url).hostname, urlsplit(url).port
    reader = socket.create_connection((host, port))
    reader.sendall(
        f"GET /v1/sessions/{sid}/stream?batch=%7B%22max_events%22%3A1%7D HTTP/1.1\r\n"
        f"Host: {host}:{port}\r\n\r\n".encode()
    )
    try:
        # The stream is open (and listening) before the writes: with no router here to catch up, a write made
        # before it listened would leave it to its slow poll.
        reader.settimeout(10)
        received = bytearray()
        while b"stream open" not in received:
            received += await asyncio.to_thread(reader.recv, 4096)
        big = "m" * 40_000
        for n in range(600):  # about 24 MB of messages: far more than the sockets' buffers hold
            item = {"type": "text", "message": big}
            await platform.command({"command": "post_thread_item", "session_id": sid, "alias": f"c/{n}", "item": item})

        # Not a byte read all this while: the server's sends block, and it must give up on this reader.
        for _ in range(600):
            if any("too slow to read" in r.getMessage() for r in caplog.records):
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the server went on waiting for a reader that read nothing for a minute")
        while chunk := await asyncio.to_thread(reader.recv, 1 << 20):
            received += chunk
        # The connection ended (recv answered b""): the server let the reader go. Its last message, `event:
        # closed` with the reason, is sent when the reader's buffers have room for it.
        assert received.count(b"event: batch") < 600, "it stopped sending to a reader that stopped reading"
    finally:
        reader.close()


async def test_a_python_client_that_leaves_its_stream_early_closes_it_cleanly(api: tuple[str, Platform]) -> None:
    """The README's `async for batch in client.stream(...): break`, in a program of its own: it ends with nothing
    said on stderr (the event loop's finalizer closing httpx's stream context manager beside this one's exit said
    `aclose(): asynchronous generator is already running` at the end of every `asyncio.run`)."""
    url, platform = api
    sid = await session(platform)
    await write(platform, sid, "a/1")
    program = (
        "import asyncio, sys\n"
        "from orchestrator.client import Client\n"
        "async def main() -> None:\n"
        "    async with Client.http(sys.argv[1]) as client:\n"
        "        async for batch in client.stream(sys.argv[2], after=0):\n"
        "            print(batch['count'])\n"
        "            break\n"
        "asyncio.run(main())\n"
    )
    done = await asyncio.create_subprocess_exec(
        sys.executable, "-c", program, url, sid, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(done.communicate(), 60)
    assert (done.returncode, out.decode().split(), err.decode()) == (0, ["1"], "")
