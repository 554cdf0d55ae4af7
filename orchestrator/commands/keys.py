"""API keys: `create_api_key` (its secret answered once), `list_api_keys`, `revoke_api_key`, and `whoami`, the calling
key's own name and scopes and what they reach (docs/security.md).

Owns the keys' arguments and replies; the secret's shape and digest are the core's (`key_secrets`), the rows the
store's (`store/keys.py`), and refusing a revoked or expired key the gate's, within its cache's lifetime.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, Field, StringConstraints, field_validator

from orchestrator.commands.access import current_principal
from orchestrator.commands.registry import COMMANDS, Request, command
from orchestrator.commands.replies import Reply, Shape
from orchestrator.core.access import may_call
from orchestrator.core.errors import CommandError
from orchestrator.core.key_secrets import KEY_NAME, RESERVED_NAMES, digest, key_secret
from orchestrator.core.scopes import parse_scope
from orchestrator.store.keys import key_view

if TYPE_CHECKING:
    from orchestrator.commands.context import CommandContext

MAX_SCOPES = 50
MAX_REQUESTS_PER_SECOND = 1_000_000.0


def _key_name(value: str) -> str:
    if not KEY_NAME.fullmatch(value):
        raise ValueError("must be 1 to 64 letters, digits and '_', '.', '@', '-', starting with a letter or digit")
    if value.lower() in RESERVED_NAMES:  # `Anonymous` would read as the open API's actor
        raise ValueError(f"{value!r} is reserved ({', '.join(sorted(RESERVED_NAMES))}, in any case)")
    return value


def _scope(value: str) -> str:
    parse_scope(value)
    return value


KeyName = Annotated[str, AfterValidator(_key_name)]
ScopeText = Annotated[str, StringConstraints(min_length=1, max_length=300), AfterValidator(_scope)]


class CreateApiKey(Request):
    command: Literal["create_api_key"]
    name: KeyName = Field(description="the key's name, never reused (letters, digits and `_.@-`)")
    scopes: Annotated[list[ScopeText], Field(min_length=1, max_length=MAX_SCOPES)] = Field(
        description="what it may do: `admin`, `read:<session glob>`, `write:<session glob>[:<alias glob>]`,"
        " `emit:<type glob>`, `listen:<session glob>`, `listeners` (docs/security.md)"
    )
    requests_per_second: Annotated[float, Field(gt=0, le=MAX_REQUESTS_PER_SECOND)] | None = Field(
        default=None, description="its request rate; none: the deployment's `key_requests_per_second`"
    )
    # ISO 8601 with a time zone (`2027-01-01T00:00:00Z`); the key is refused from then on.
    expires_at: str | None = Field(
        default=None, description="an ISO 8601 time with its zone (`2027-01-01T00:00:00Z`); refused from then on"
    )

    @field_validator("expires_at")
    @classmethod
    def _expires_at(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("must be an ISO 8601 time with a time zone, e.g. 2027-01-01T00:00:00Z") from None
        if moment.tzinfo is None:
            raise ValueError("must name its time zone (e.g. a trailing Z for UTC)")
        return value


class ListApiKeys(Request):
    command: Literal["list_api_keys"]


class Whoami(Request):
    command: Literal["whoami"]


class RevokeApiKey(Request):
    command: Literal["revoke_api_key"]
    name: Annotated[str, StringConstraints(min_length=1, max_length=64)] = Field(description="the key's name")


class KeyView(Shape):
    """A key, never its secret."""

    name: str
    id: str
    scopes: list[str]
    requests_per_second: float | None = Field(description="its request rate; null: not limited")
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    state: Literal["active", "revoked", "expired"]


class NewKey(KeyView):
    secret: str = Field(description="shown this once: only a digest is kept")


class CreateApiKeyReply(Reply):
    key: NewKey
    warnings: list[str] | None = Field(default=None, description="with the first key: the API is no longer open")


class ListApiKeysReply(Reply):
    keys: list[KeyView]


class RevokeApiKeyReply(Reply):
    key: KeyView


class CallingKey(Shape):
    name: str = Field(description="the key's name; `bootstrap`, `anonymous` or `local` for the doors' own callers")
    scopes: list[str]
    requests_per_second: float | None = Field(description="its request rate; null: not limited")


class WhoamiReply(Reply):
    key: CallingKey
    commands: list[str] = Field(description="the commands its scopes may call, by name")


@command(
    "create_api_key",
    CreateApiKey,
    reply=CreateApiKeyReply,
    example={
        "command": "create_api_key",
        "name": "ci",
        "scopes": ["write:support/**", "listeners"],
        "requests_per_second": 20,
        "expires_at": "2030-01-01T00:00:00Z",
    },
)
async def create_api_key(platform: CommandContext, req: CreateApiKey) -> dict[str, Any]:
    """A new key with its scopes; the reply holds its secret, which is never shown again (only a digest is kept)."""
    expires = datetime.fromisoformat(req.expires_at) if req.expires_at is not None else None
    now = datetime.now(UTC)
    if expires is not None and expires <= now:
        raise CommandError("invalid_request", "expires_at: must be in the future")
    rate = req.requests_per_second or platform.settings.limits.key_requests_per_second
    key_id = secrets.token_hex(6)
    secret = key_secret(key_id, secrets.token_urlsafe(32))
    was_open = platform.settings.api_token is None and not await platform.store.any_keys()
    row = await platform.store.create_key(key_id, req.name, digest(secret), list(req.scopes), rate, expires)
    reply: dict[str, Any] = {"key": {**key_view(row, now), "secret": secret}}
    if was_open:
        reply["warnings"] = [first_key_warning(req.name, "admin" in req.scopes)]
    return reply


def first_key_warning(name: str, admin: bool) -> str:
    """What the first key closes: the API was open, and every request now needs a key."""
    closed = (
        f"name: {name!r} is the first key, so the API is no longer open: every request now needs a key"
        " (`--token` or ORCHESTRATOR_API_TOKEN, `Authorization: Bearer` over HTTP)"
    )
    if admin:
        return f"{closed}; this one is an admin key: keep its secret, it makes and revokes the others"
    return (
        f"{closed}; this one cannot make keys, so keep it and make an admin key on the platform's machine:"
        " `orchestrator keys create NAME --scope admin --local` (with ORCHESTRATOR_DATABASE_URL from the banner)"
    )


@command(
    "list_api_keys",
    ListApiKeys,
    reply=ListApiKeysReply,
    example={"command": "list_api_keys"},
)
async def list_api_keys(platform: CommandContext, req: ListApiKeys) -> dict[str, Any]:
    """Every key ever created, revoked and expired ones too (their names stay taken), never a secret."""
    now = datetime.now(UTC)
    return {"keys": [key_view(r, now) for r in await platform.store.list_keys()]}


@command(
    "revoke_api_key",
    RevokeApiKey,
    reply=RevokeApiKeyReply,
    errors=("not_found",),
    example={"command": "revoke_api_key", "name": "ci"},
)
async def revoke_api_key(platform: CommandContext, req: RevokeApiKey) -> dict[str, Any]:
    """Revoke a key: every API replica refuses it within a second (`orchestrator.door.gate`), its browser sessions and
    stream tickets at once."""
    return {"key": key_view(await platform.store.revoke_key(req.name), datetime.now(UTC))}


@command(
    "whoami",
    Whoami,
    reply=WhoamiReply,
    example={"command": "whoami"},
)
async def whoami(platform: CommandContext, req: Whoami) -> dict[str, Any]:
    """The key that calls: its name, scopes and request rate, and the commands its scopes may call somewhere, a
    dry judgement made before any session is named (one listed may still be refused on a session, an alias or
    an event type outside its scopes; one not listed is refused everywhere). Any key may ask. The bootstrap
    token answers `bootstrap`, an open API (no token, no key) `anonymous`, the in-process door `local`: each an
    admin."""
    principal = current_principal()
    grant = principal.grant
    return {
        "key": {
            "name": principal.name,
            "scopes": [scope.text for scope in grant.scopes],
            "requests_per_second": principal.requests_per_second,
        },
        "commands": sorted(name for name in COMMANDS if may_call(grant, name)),
    }
