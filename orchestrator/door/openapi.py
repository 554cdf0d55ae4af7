"""`GET /v1/openapi.json`: an OpenAPI 3.1 document of the HTTP door, generated from the command registry.

Owns the document's layout. `POST /v1/commands` takes a `oneOf` of every command's body (the registry's JSON
Schemas, `commands.reference`) with a discriminator on `command`, one named example per command, and answers
one of the commands' replies (each command's reply model, a component named for it) or an error reply per status
(`auth.STATUS_BY_ERROR`); each body names its reply's component and the errors it has besides
(`x-orchestrator-reply-schema`, `x-orchestrator-errors`, and the reply in a line, `x-orchestrator-reply`). The
replies are an `anyOf`, not a `oneOf`: a reply does not name its command, and some commands answer the same
fields (`close_session` and `reopen_session`; `open_session` too, unless it was given a retention), so one reply
may fit several; the request's `command` says which it is. One path cannot be described once per body in
OpenAPI, and a path per command would be a path the server does not have (docs/decisions.md). The schemas'
`$defs` are lifted into `components/schemas`, where tools look for them. The streams, stream tickets, schemas,
health probes and the bearer scheme are described here by hand, beside the routes in `api.py`. Built again only
when the registry changes, so a command registered anywhere shows.
"""

from __future__ import annotations

import copy
import importlib.metadata
from typing import Any

from orchestrator.commands.reference import (
    ERROR_MEANINGS,
    JSON_SCHEMA_DIALECT,
    command_schema,
    listener_schema,
    reference,
    reply_schema,
    schema_without,
)
from orchestrator.commands.registry import COMMANDS
from orchestrator.core.connection_listener import STREAM_PARAMS
from orchestrator.door.auth import STATUS_BY_ERROR

OPENAPI_VERSION = "3.1.0"
REF = "#/components/schemas/"
# A body over the API's size limit is refused before it is read as a command.
TOO_LARGE = 413
# What the hand-written routes may answer besides success, by status (the door's own look before a stream or a
# ticket may find the database away: `unavailable` there too).
STREAM_STATUSES = (400, 401, 403, 404, 429, 500, 503)
TICKET_STATUSES = (400, 401, 403, 404, 429, 500, 503)

_cache: tuple[tuple[tuple[str, int], ...], dict[str, Any]] | None = None


def openapi_document() -> dict[str, Any]:
    """The document, as `GET /v1/openapi.json` serves it. Not to be changed by its callers."""
    global _cache
    registry = tuple((name, id(spec)) for name, spec in COMMANDS.items())
    if _cache is None or _cache[0] != registry:
        _cache = (registry, _build())
    return _cache[1]


class LiftedSchemas:
    """`components/schemas`: each root schema's `$defs` lifted beside it, its `$ref`s pointed there. Two defs of
    one name that differ (or that point at defs that differ) keep apart, the later one named for its owner."""

    def __init__(self) -> None:
        self.found: dict[str, Any] = {}
        # Each lifted def's own text, as its owner had it, to tell an equal one from a different one.
        self._raw: dict[str, Any] = {}

    def add(self, name: str, schema: dict[str, Any]) -> None:
        if name in self.found:
            raise ValueError(f"two schemas named {name!r} in the OpenAPI document")
        self.found[name] = schema

    def lift(self, owner: str, schema: dict[str, Any]) -> dict[str, Any]:
        """`schema` without `$schema`, `title` and `$defs`, its defs among the components."""
        root = {k: v for k, v in schema.items() if k not in ("$schema", "title", "$defs")}
        defs: dict[str, Any] = schema.get("$defs", {})
        apart = {n for n in defs if n in self._raw and self._raw[n] != defs[n]}
        while True:  # a def pointing at one kept apart is kept apart too
            more = {n for n in defs if n not in apart and _refs(defs[n]) & apart}
            if not more:
                break
            apart |= more
        names = {n: f"{owner}.{n}" if n in apart else n for n in defs}
        for name, body in defs.items():
            if names[name] not in self.found:
                self._raw.setdefault(name, body)
                self.found[names[name]] = _pointed(body, names)
        lifted: dict[str, Any] = _pointed(root, names)
        return lifted


def _refs(node: Any) -> set[str]:
    """The defs `node` points at."""
    found: set[str] = set()
    if isinstance(node, list):
        for item in node:
            found |= _refs(item)
    elif isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            found.add(node["$ref"].rsplit("/", 1)[-1])
        for value in node.values():
            found |= _refs(value)
    return found


def _pointed(node: Any, names: dict[str, str]) -> Any:
    """`node` with each `#/$defs/X` pointing at X's component."""
    if isinstance(node, list):
        return [_pointed(item, names) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _pointed(value, names) for key, value in node.items()}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        out["$ref"] = REF + names[ref.removeprefix("#/$defs/")]
    mapping = (node.get("discriminator") or {}).get("mapping") if "discriminator" in node else None
    if isinstance(mapping, dict):
        # A discriminator's mapping names its schemas by reference too.
        out["discriminator"] = {
            **out["discriminator"],
            "mapping": {
                tag: REF + names[target.removeprefix("#/$defs/")]
                if isinstance(target, str) and target.startswith("#/$defs/")
                else target
                for tag, target in mapping.items()
            },
        }
    return out


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _error_response(status: int, codes: list[str]) -> dict[str, Any]:
    meanings = "; ".join(f"`{code}`: {ERROR_MEANINGS.get(code, '')}" for code in codes)
    response: dict[str, Any] = {
        "description": meanings,
        "content": _json({"allOf": [{"$ref": REF + "ErrorReply"}], "properties": {"error": {"enum": codes}}}),
    }
    if status in (429, 503):
        seconds = {"schema": {"type": "integer", "minimum": 1}, "description": "seconds until a retry may pass"}
        response["headers"] = {"Retry-After": seconds}
    if status == 401:
        response["headers"] = {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "`Bearer`"}}
    if status == 405:
        response["headers"] = {"Allow": {"schema": {"type": "string"}, "description": "the methods the path takes"}}
    return response


def _errors(statuses: tuple[int, ...] | None = None) -> dict[str, Any]:
    by_status: dict[int, list[str]] = {}
    for code, status in STATUS_BY_ERROR.items():
        by_status.setdefault(status, []).append(code)
    by_status[TOO_LARGE] = ["limit_exceeded"]
    # A browser session's request without its CSRF token is `unauthorized` with 403 (`auth.unauthorized`); no key,
    # or one wrong, revoked or expired, 401.
    by_status[403] = [*by_status[403], "unauthorized"]
    # A method a path does not take (`api.http_error`), with its `Allow` header.
    by_status[405] = ["invalid_request"]
    wanted = sorted(by_status) if statuses is None else statuses
    return {str(status): _error_response(status, by_status[status]) for status in wanted if status in by_status}


def _command_bodies(schemas: LiftedSchemas) -> dict[str, Any]:
    """Each command's body and reply among the components, and the request body of `POST /v1/commands`."""
    mapping: dict[str, str] = {}
    examples: dict[str, Any] = {}
    for name in sorted(COMMANDS):
        ref = reference(name)
        body = schemas.lift(name, command_schema(name))
        reply = reply_schema(name)["title"]
        body["description"] = f"{ref.summary}\n\nReply: {ref.reply}."
        body["x-orchestrator-reply"] = ref.reply
        body["x-orchestrator-reply-schema"] = REF + reply
        body["x-orchestrator-errors"] = list(ref.errors)
        schemas.add(name, body)
        mapping[name] = REF + name
        if ref.example is not None:
            examples[name] = {"summary": ref.summary.split(". ")[0].rstrip("."), "value": ref.example}
    # The replies after every body: a shape both hold keeps its name for the body's (closed) form.
    for name in sorted(COMMANDS):
        _reply(schemas, name)
    schemas.add(
        "Command",
        {
            "oneOf": [{"$ref": ref} for ref in mapping.values()],
            "discriminator": {"propertyName": "command", "mapping": mapping},
        },
    )
    return {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": REF + "Command"}, "examples": examples}},
    }


def _reply(schemas: LiftedSchemas, name: str) -> None:
    """`name`'s reply among the components, once for the commands that share its model.
    Open where the model is closed (`_opened`): a shape a request shares, closed there, is the replies' own
    (`Reply.CronRepeat`), one for every reply that holds it."""
    schema = _opened(reply_schema(name))
    title: str = schema["title"]
    if title not in schemas.found:
        schemas.add(title, schemas.lift("Reply", schema))


def _opened(schema: Any) -> Any:
    """`schema` without `additionalProperties: false` at any level. A reply model is closed so that the test suite
    finds a field a command answers and does not name (`commands/replies.py`); a client that checks a reply against
    this document must still take a field a later release adds. (The TypeScript types stay closed: a type takes
    what it does not name at run time, and a misspelt field does not compile.)"""
    return schema_without(schema, lambda key, value: key == "additionalProperties" and value is False)


def _replies() -> dict[str, Any]:
    """The success reply of `POST /v1/commands`: any command's (`anyOf`: see above)."""
    titles = sorted({reply_schema(name)["title"] for name in COMMANDS})
    return {"anyOf": [{"$ref": REF + title} for title in titles]}


def _commands_path(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "post": {
            "operationId": "command",
            "summary": "Run one command",
            "description": "Every operation is one JSON command (docs/commands.md): the body names it in `command`. "
            "The reply is the command's, with the HTTP status its error code maps to; an error reply's message "
            "starts with the field at fault, and nothing changed.",
            "security": [{"bearer": []}, {"browserSession": []}],
            "requestBody": request,
            "responses": {
                "200": {
                    "description": "the command's reply: its body's `x-orchestrator-reply-schema`",
                    "content": _json({"$ref": REF + "CommandReply"}),
                },
                **_errors(),
            },
        }
    }


def _stream_path() -> dict[str, Any]:
    assert set(STREAM_PARAMS) == {"filter", "batch", "client", "after", "access_token", "ticket"}
    return {
        "get": {
            "operationId": "stream_session",
            "summary": "A connection listener: the session's matching events as Server-Sent Events",
            "description": "One `event: batch` message per batch (its data a `StreamBatch`, its id the batch's last "
            "event id); `event: trimmed` ({after, first_id}) when retention deleted what was asked for; "
            "`event: closed` (a key revoked, the session deleted; a reader too slow, when its connection has "
            "room left for the message, else its connection just ends, often partway through a message) and "
            "`event: shutdown` (the server stops; {reason, last_id}) end it. A connection that ends partway "
            "through a message did not deliver it: reconnect with the last whole message's id. Needs a "
            "`listen:` scope on the session. Any other query parameter is refused with 400.",
            "security": [{"bearer": []}, {"streamTicket": []}, {"streamAccessToken": []}],
            "parameters": [
                {"name": "session_id", "in": "path", "required": True, "schema": {"type": "string"}},
                {
                    "name": "filter",
                    "in": "query",
                    "description": "which events, as a saved listener's `filter` (URL-encoded JSON)",
                    "content": _json({"$ref": REF + "ListenerFilter"}),
                },
                {
                    "name": "batch",
                    "in": "query",
                    "description": "how they are batched, as a saved listener's `batch` (URL-encoded JSON)",
                    "content": _json({"$ref": REF + "BatchSpec"}),
                },
                {
                    "name": "client",
                    "in": "query",
                    "description": "the reader's client id: its own writes are left out",
                    "schema": {"type": "string"},
                },
                {
                    "name": "after",
                    "in": "query",
                    "description": "start after this event id (default: the session's end)",
                    "schema": {"type": "integer", "minimum": 0},
                },
                {
                    "name": "Last-Event-ID",
                    "in": "header",
                    "description": "a reconnect's place: wins over `after`",
                    "schema": {"type": "integer", "minimum": 0},
                },
            ],
            "responses": {
                "200": {
                    "description": "the stream, until the reader goes or the server lets it go",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                },
                **_errors(STREAM_STATUSES),
            },
        }
    }


def _ticket_path() -> dict[str, Any]:
    body = {
        "type": "object",
        "required": ["session_id"],
        "properties": {"session_id": {"type": "string", "minLength": 1, "maxLength": 64}},
        "additionalProperties": False,
    }
    reply = {
        "type": "object",
        "required": ["status", "ticket", "expires_in"],
        "properties": {
            "status": {"const": "success"},
            "ticket": {"type": "string", "description": "opens the session's stream once, as `?ticket=`"},
            "expires_in": {"type": "number", "description": "seconds it stays good"},
        },
    }
    return {
        "post": {
            "operationId": "new_stream_ticket",
            "summary": "A single-use ticket that opens one session's stream (for a browser's EventSource)",
            "security": [{"bearer": []}, {"browserSession": []}],
            "requestBody": {"required": True, "content": _json(body)},
            "responses": {"200": {"description": "the ticket", "content": _json(reply)}, **_errors(TICKET_STATUSES)},
        }
    }


def _open(operation_id: str, summary: str, responses: dict[str, Any], **more: Any) -> dict[str, Any]:
    """A GET that needs no credentials."""
    return {"get": {"operationId": operation_id, "summary": summary, "security": [], "responses": responses, **more}}


def _reads_paths() -> dict[str, Any]:
    any_schema = {"type": "object", "description": "a JSON Schema (draft 2020-12)"}
    index = {
        "type": "object",
        "required": ["listener", "commands"],
        "properties": {"listener": any_schema, "commands": {"type": "object", "additionalProperties": any_schema}},
    }
    names = ["listener", *sorted(COMMANDS)]
    name = {"name": "name", "in": "path", "required": True, "schema": {"type": "string", "enum": names}}
    missing = {"404": _error_response(404, ["not_found"])}
    status = {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}
    unready = {**status, "properties": {"status": {"const": "unavailable"}, "error": {"type": "string"}}}
    return {
        "/v1/schema": _open(
            "schema_index",
            "Every command's JSON Schema and a listener body's",
            {"200": {"description": "the schemas", "content": _json(index)}},
        ),
        "/v1/schema/{name}": _open(
            "schema",
            "One command's JSON Schema, or a listener body's (`listener`)",
            {"200": {"description": "the schema", "content": _json(any_schema)}, **missing},
            parameters=[name],
        ),
        "/v1/openapi.json": _open(
            "openapi",
            "This document",
            {"200": {"description": "OpenAPI 3.1", "content": _json({"type": "object"})}},
        ),
        "/healthz": _open(
            "healthz",
            "Liveness: answers while the process lives",
            {"200": {"description": "alive", "content": _json({**status, "properties": {"status": {"const": "ok"}}})}},
        ),
        "/readyz": _open(
            "readyz",
            "Readiness: 200 once the database answers a command",
            {
                "200": {
                    "description": "ready",
                    "content": _json({**status, "properties": {"status": {"const": "ready"}}}),
                },
                "503": {"description": "the database does not answer", "content": _json(unready)},
            },
        ),
    }


SHAPES: dict[str, Any] = {
    "ErrorReply": {
        "type": "object",
        "required": ["status", "error", "message"],
        "properties": {
            "status": {"const": "error"},
            "error": {"type": "string", "description": "the error code (docs/commands.md, Errors)"},
            "message": {"type": "string", "description": "starts with the field at fault"},
            "retry_after": {"type": "integer", "description": "`rate_limited`: seconds until a retry may pass"},
        },
    },
    "StreamBatch": {
        "type": "object",
        "description": "the data of a stream's `event: batch` message",
        "required": ["first_id", "last_id", "count", "events"],
        "properties": {
            "first_id": {"type": "integer"},
            "last_id": {"type": "integer"},
            "count": {"type": "integer"},
            "events": {"type": "array", "items": {"type": "object"}, "description": "the events' envelopes"},
        },
    },
}

SECURITY = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "`ORCHESTRATOR_API_TOKEN` (the bootstrap admin key) or a key made with `create_api_key` "
        "(docs/security.md). None is needed while the API is open: no token set and no key ever made.",
    },
    "browserSession": {
        "type": "apiKey",
        "in": "cookie",
        "name": "orchestrator_session",
        "description": "the dashboard's sign-in; a request other than GET carries its CSRF token in X-CSRF-Token",
    },
    "streamTicket": {
        "type": "apiKey",
        "in": "query",
        "name": "ticket",
        "description": "from `POST /v1/stream-tickets`: opens that session's stream once, within 30 s",
    },
    "streamAccessToken": {
        "type": "apiKey",
        "in": "query",
        "name": "access_token",
        "description": "a key in the URL, for a client that cannot send a header (a browser takes a ticket)",
    },
}


def _version() -> str:
    try:
        return importlib.metadata.version("orchestrator")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _build() -> dict[str, Any]:
    schemas = LiftedSchemas()
    listener = schemas.lift("listener", listener_schema())
    schemas.found.setdefault("ListenerDeclaration", listener)
    request = _command_bodies(schemas)
    schemas.add("CommandReply", {"description": "a command's success reply", **_replies()})
    for name, shape in SHAPES.items():
        schemas.add(name, copy.deepcopy(shape))
    return {
        "openapi": OPENAPI_VERSION,
        "jsonSchemaDialect": JSON_SCHEMA_DIALECT,
        "info": {
            "title": "orchestrator",
            "version": _version(),
            "description": "Declared listeners on Temporal and PostgreSQL: one JSON command per operation "
            "(docs/commands.md), connection listeners over Server-Sent Events, and the commands' JSON Schemas.",
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/commands": _commands_path(request),
            "/v1/sessions/{session_id}/stream": _stream_path(),
            "/v1/stream-tickets": _ticket_path(),
            **_reads_paths(),
        },
        "components": {"schemas": schemas.found, "securitySchemes": SECURITY},
    }
