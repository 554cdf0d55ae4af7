"""Every public method of `Client` is called one way, and each command's method takes that command's arguments.

The rule (`orchestrator/client.py`'s header): `session_id` first when the command needs one; after it, as
positional arguments, what the command acts on and the body it carries (a dict or a list, which cannot be taken
for a name), nothing else; every optional argument keyword-only, a `session_id` a command may do without too.
A swap of two strings (`get_schedule(alias, session_id)`) then cannot be written without a keyword.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from orchestrator.client import Client
from orchestrator.commands import COMMANDS
from orchestrator.commands.reference import reference

# The door's own methods: how a client is made, a raw command, the stream, closing. Every other is a command's.
DOORS_OWN = {"http", "local", "command", "stream", "aclose"}
# What a method asks for that its command may find elsewhere: a schedule's session and alias are its address
# (`create_schedule` takes them from a flat body's target too).
ADDRESSED = {"create_schedule": {"session_id", "alias"}}
# What may follow `session_id` positionally: the thing acted on, then a body.
MOST_POSITIONAL_AFTER_SESSION = 2


def public_methods() -> dict[str, list[inspect.Parameter]]:
    """Each public method's parameters (without `self`)."""
    found = {}
    for name in dir(Client):
        if name.startswith("_") or not callable(getattr(Client, name)):
            continue
        parameters = list(inspect.signature(getattr(Client, name)).parameters.values())
        found[name] = [p for p in parameters if p.name != "self"]
    return found


def positional(parameters: list[inspect.Parameter]) -> list[inspect.Parameter]:
    return [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def is_body(parameter: inspect.Parameter) -> bool:
    return str(parameter.annotation).startswith(("dict[", "list["))


def breaks_of_the_rule(parameters: list[inspect.Parameter]) -> list[str]:
    """What in one method's parameters breaks the rule (nothing: it keeps it)."""
    broken = []
    by_name = {p.name: p for p in parameters}
    places = positional(parameters)
    session = by_name.get("session_id")
    if session is not None:
        needed = session.default is inspect.Parameter.empty
        if needed and (not places or places[0].name != "session_id"):
            broken.append("session_id, which it needs, is not its first argument")
        if not needed and session.kind != session.KEYWORD_ONLY:
            broken.append("session_id, which it may do without, is not keyword-only")
    optional = [p for p in places if p.default is not p.empty and p.name != "session_id"]
    broken += [f"{p.name} is optional but not keyword-only" for p in optional]
    broken += [
        f"{p.name} takes any number of arguments" for p in parameters if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    rest = places[1:] if places and places[0].name == "session_id" else places
    if len(rest) > MOST_POSITIONAL_AFTER_SESSION:
        broken.append(f"{[p.name for p in rest]} are positional: at most what it acts on and a body")
    if len(rest) == MOST_POSITIONAL_AFTER_SESSION and not is_body(rest[1]):
        broken.append(f"{rest[1].name} follows {rest[0].name} positionally but is no body (a dict or a list)")
    broken += [f"{p.name}, a flag, is positional" for p in rest if str(p.annotation) == "bool"]
    return broken


def test_every_public_method_keeps_the_rule() -> None:
    broken = {name: found for name, params in public_methods().items() if (found := breaks_of_the_rule(params))}
    assert broken == {}


@pytest.mark.parametrize(
    ("signature", "breaks"),
    [
        (
            "alias: str, session_id: str",
            [
                "session_id, which it needs, is not its first argument",
                "session_id follows alias positionally but is no body (a dict or a list)",
            ],
        ),
        (
            "name: str, session_id: str | None = None",
            [
                "session_id, which it may do without, is not keyword-only",
                "session_id follows name positionally but is no body (a dict or a list)",
            ],
        ),
        ("session_id: str, limit: int | None = None", ["limit is optional but not keyword-only"]),
        (
            "session_id: str, after: int, through: int",
            ["through follows after positionally but is no body (a dict or a list)"],
        ),
        (
            "session_id: str, name: str, enabled: bool",
            ["enabled follows name positionally but is no body (a dict or a list)", "enabled, a flag, is positional"],
        ),
        ("session_id: str, alias: str, value: dict[str, Any], **extra: Any", ["extra takes any number of arguments"]),
        ("session_id: str, alias: str, value: dict[str, Any], *, if_rev: int | None = None", []),
        ("name: str, *, session_id: str | None = None", []),
    ],
)
def test_the_rule_refuses_what_misleads(signature: str, breaks: list[str]) -> None:
    namespace: dict[str, Any] = {}
    exec(f"from __future__ import annotations\nfrom typing import Any\ndef method({signature}): ...", namespace)
    parameters = list(inspect.signature(namespace["method"]).parameters.values())
    assert breaks_of_the_rule(parameters) == breaks


def test_every_method_is_a_command_of_the_registry_and_every_command_has_one() -> None:
    # `client.command({...})` reaches every command anyway; the typed methods are the client's promise.
    commands = set(public_methods()) - DOORS_OWN
    assert sorted(commands - set(COMMANDS)) == [], "methods that name no command"
    assert sorted(set(COMMANDS) - commands) == [], "commands with no method"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_commands_method_takes_the_commands_arguments_and_needs_what_it_needs(name: str) -> None:
    parameters = public_methods()[name]
    arguments = reference(name).arguments
    assert {p.name for p in parameters} == {a.name for a in arguments}
    needed = {p.name for p in parameters if p.default is inspect.Parameter.empty}
    assert needed == {a.name for a in arguments if a.required} | ADDRESSED.get(name, set())


class Recorder:
    """A platform that answers every command with success and keeps what it was sent."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def command(self, body: Any) -> dict[str, Any]:
        self.sent.append(body)
        return {"status": "success"}


async def test_the_old_order_of_the_schedule_methods_is_refused_naming_the_new_one() -> None:
    platform = Recorder()
    client = Client.local(platform)
    sid = "ses_0123456789abcdef0123"
    with pytest.raises(TypeError, match=r"get_schedule\(session_id, alias, \.\.\.\)") as refused:
        await client.get_schedule("clock", sid)
    assert "'clock'" in str(refused.value)
    with pytest.raises(TypeError, match=r"list_schedule_runs\(session_id, alias"):
        await client.list_schedule_runs("hourly", sid)
    assert platform.sent == [], "nothing was sent"

    await client.get_schedule(sid, "clock")
    await client.write_object(sid, "ses_notes", {"type": "note"})  # an alias may start so; a session's id first
    assert platform.sent == [
        {"command": "get_schedule", "session_id": sid, "alias": "clock"},
        {"command": "write_object", "session_id": sid, "alias": "ses_notes", "value": {"type": "note"}},
    ]
