"""The command line: `orchestrator call | status | events | keys | mcp | dev | worker | api | plan | restored | new`.
Argument parsing only; `runtime` runs things, `inspect` builds what `status` and `events` show, `starter` writes what
`new` does, `store.restored` does what `restored` does.

Exit codes of `call`, `status`, `events` and `keys`: 0 for a success reply, 1 for an error reply, 2 for bad usage or
a command that is not JSON, 3 when the API cannot be reached or answers `unavailable`. `call` prints the reply as
one line of JSON on stdout; `status` prints a table (or one JSON document with `--json`); `events` prints one line
per event (one JSON object per line with `--json`); `keys create` and `keys revoke` print the reply (a new key's
secret is in it, shown this once), `keys list` a table (the reply with `--json`). `call` over HTTP imports only the
standard library (`plain_http`): it answers in about a tenth of a second; `call --help COMMAND` loads the registry.

Exit codes of `restored`: 0 once done, 2 when no database is named, its URL is not a PostgreSQL URL or the database
holds no platform in the configured schema, 3 when the database cannot be reached, 1 when PostgreSQL refuses a
statement; nothing is changed but with 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

# Only the standard library above: the client, the settings and the runtime load once Ctrl-C is handled.
if TYPE_CHECKING:
    from orchestrator.config import Settings
    from orchestrator.store.restored import Restored

EXIT_SUCCESS = 0
EXIT_ERROR_REPLY = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130
# 128 + SIGPIPE, what a shell reports for a tool whose reader went away.
EXIT_BROKEN_PIPE = 141


# Where the commands that call the API go when `--url` is not given (`plain_http.door_from_env`).
URL_HELP = "the API's base URL (default: HTTP_HOST:HTTP_PORT when set, else the dev running on the data folder)"


def _port(text: str) -> int:
    """A port number on the command line (0 where a server may pick a free one): anything else is refused by
    argparse, naming the flag, before anything starts."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535)")
    return port


def _announce(line: str) -> None:
    print(line, flush=True)


def _print_reply(reply: dict[str, Any]) -> None:
    print(json.dumps(reply, ensure_ascii=False), flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="orchestrator", description="Declared listeners on Temporal and PostgreSQL.")
    sub = parser.add_subparsers(dest="subcommand", required=True)

    call = sub.add_parser(
        "call",
        help="send one JSON command and print the reply",
        add_help=False,
        epilog="The commands, their arguments and replies: `orchestrator call --help COMMAND`, or docs/commands.md.",
    )
    call.add_argument(
        "json", metavar="JSON", nargs="?", help='the command, e.g. \'{"command": "open_session"}\'; - reads stdin'
    )
    call.add_argument(
        "-h",
        "--help",
        nargs="?",
        const="",
        metavar="COMMAND",
        help="show this help, or with COMMAND its arguments, reply and errors",
    )
    call.set_defaults(usage=call.format_help)
    call.add_argument("--url", help=URL_HELP)
    call.add_argument("--token", help="bearer token (default: ORCHESTRATOR_API_TOKEN)")
    call.add_argument(
        "--local", action="store_true", help="run in this process against ORCHESTRATOR_DATABASE_URL, no API"
    )

    status = sub.add_parser("status", help="show a session's listeners: lanes, pending, runs, retries, outcomes")
    status.add_argument("--session", required=True, metavar="ID", help="the session's id")
    status.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    _add_door_arguments(status)

    events = sub.add_parser("events", help="print a session's events, and with --follow keep tailing them")
    events.add_argument("--session", required=True, metavar="ID", help="the session's id")
    events.add_argument("--after", type=int, default=0, metavar="N", help="start after event id N (default: 0)")
    events.add_argument("--types", nargs="+", metavar="GLOB", help="only these event types (globs, e.g. object.**)")
    events.add_argument(
        "--follow", "-f", action="store_true", help="keep following new events (the session's stream) until Ctrl-C"
    )
    events.add_argument(
        "--exit-on-disconnect",
        action="store_true",
        help="with --follow, exit (code 3) when the API goes away instead of reconnecting and resuming",
    )
    events.add_argument("--json", action="store_true", help="print each event as one line of JSON")
    _add_door_arguments(events)

    keys = sub.add_parser("keys", help="create, list and revoke API keys (needs an admin key)")
    keys_sub = keys.add_subparsers(dest="keys_action", required=True, metavar="{create,list,revoke}")
    create = keys_sub.add_parser("create", help="create a key and print its secret (shown this once)")
    create.add_argument("name", help="the key's name (never reused, so events name one key for ever)")
    create.add_argument(
        "--scope",
        dest="scopes",
        action="append",
        required=True,
        metavar="SCOPE",
        help="a scope (repeat for more): admin, listeners, read:GLOB, listen:GLOB, write:GLOB[:ALIAS-GLOB],"
        " emit:TYPE-GLOB[:GLOB]",
    )
    create.add_argument("--requests-per-second", type=float, metavar="N", help="the key's request rate")
    create.add_argument("--expires-at", metavar="TIME", help="when it stops working (ISO 8601 with a time zone)")
    _add_door_arguments(create)
    listing = keys_sub.add_parser("list", help="every key: name, state, scopes (never a secret)")
    listing.add_argument("--json", action="store_true", help="print the reply instead of a table")
    _add_door_arguments(listing)
    revoke = keys_sub.add_parser("revoke", help="revoke a key: every API replica refuses it within a second")
    revoke.add_argument("name", help="the key's name")
    _add_door_arguments(revoke)

    mcp = sub.add_parser(
        "mcp",
        help="serve the commands the key may call as MCP tools, with the docs to search (stdio, or --http PORT)",
        description="An MCP server over stdio (or streamable HTTP at http://HOST:PORT/mcp with --http) that calls"
        " the platform's HTTP API as the key of ORCHESTRATOR_API_TOKEN (or --token); docs/mcp.md.",
    )
    mcp.add_argument("--url", help=URL_HELP)
    mcp.add_argument("--token", help="the key it calls the platform as (default: ORCHESTRATOR_API_TOKEN)")
    mcp.add_argument("--http", type=_port, metavar="PORT", help="serve streamable HTTP on PORT instead of stdio")
    mcp.add_argument(
        "--host",
        default="127.0.0.1",
        help="with --http, the interface to listen on (default: 127.0.0.1; whoever reaches it acts as the key)",
    )

    dev = sub.add_parser("dev", help="run the whole platform: embedded servers, worker and HTTP API")
    dev.add_argument("--app", help="the app module or .py file (default: examples.missions.app when present)")
    dev.add_argument("--data-dir", type=Path, help="where the embedded servers keep state (default: .orchestrator)")
    dev.add_argument("--http-port", type=_port, help="the HTTP API's port (default: 8700)")
    dev.add_argument("--quiet", action="store_true", help="print no line per batch and per run's end")
    dev.add_argument("--reload", action="store_true", help="start the worker again when the app's files change")

    worker = sub.add_parser("worker", help="run the worker alone against external servers")
    worker.add_argument("--app", required=True, help="the app module or .py file")
    worker.add_argument(
        "--health-port", type=_port, metavar="N", help="serve GET /healthz on HTTP_HOST:N (for liveness probes)"
    )

    api = sub.add_parser("api", help="run the HTTP API alone against external servers")
    api.add_argument("--host", help="the interface to listen on (default: 127.0.0.1)")
    api.add_argument("--http-port", type=_port, help="the port (default: 8700)")

    plan = sub.add_parser(
        "plan", help="print what starting a worker with the app would add, change and remove (applies nothing)"
    )
    plan.add_argument("--app", required=True, help="the app module or .py file")
    plan.add_argument(
        "--data-dir",
        type=Path,
        help="the data folder of a running `orchestrator dev` whose database to read when ORCHESTRATOR_DATABASE_URL"
        " is unset (default: .orchestrator)",
    )

    _add_restored(sub)

    new = sub.add_parser("new", help="write a starter app (a listener, a workflow, a passing test) into a folder")
    new.add_argument("name", metavar="NAME", type=Path, help="the folder to create (it must not hold anything yet)")
    # The usage line names every subcommand, read off those made above so that none is ever left out.
    sub.metavar = "{" + ",".join(sub.choices) + "}"
    return parser


def _add_restored(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    restored = sub.add_parser(
        "restored",
        help="after a restore from a dump: move the event ids past the lost interval's, mark the schedules unmade",
        description="Run once on a database restored from a dump, before any worker or API starts on it"
        " (docs/operations.md, Restore): in one transaction, the next event id moves a trillion on and every"
        " schedule is marked to be made again. It prints the next event id before and after, and the schedules"
        " marked; a database with no platform in its schema (ORCHESTRATOR_DATABASE_SCHEMA) is refused, unchanged.",
    )
    restored.add_argument(
        "--database-url",
        metavar="URL",
        help="the restored database (default: ORCHESTRATOR_DATABASE_DIRECT_URL, else ORCHESTRATOR_DATABASE_URL)",
    )
    restored.add_argument(
        "--temporal-only",
        action="store_true",
        help="Temporal's namespace was restored empty and PostgreSQL kept: mark the schedules, leave the event ids",
    )


def _new(args: argparse.Namespace) -> int:
    from orchestrator.dev.starter import StarterExists, write_starter

    try:
        written = write_starter(args.name)
    except StarterExists as err:
        print(f"orchestrator new: {err}", file=sys.stderr)
        return EXIT_USAGE
    for path in written:
        _announce(f"wrote        {path}")
    # Quoted as a shell reads it, so the line can be pasted whatever the folder's name holds (a space, a quote).
    folder = shlex.quote(str(args.name))
    _announce(f"Next: cd {folder} && {_here('pytest')}, then {_here('orchestrator')} dev --app app.py")
    return EXIT_SUCCESS


def _here(tool: str) -> str:
    """A tool of this environment as a shell finds it: its name when the PATH leads to this one, else its path
    (a venv not activated: a bare `pytest` would be another Python's, without the kit)."""
    import shutil

    mine = Path(sys.executable).parent / tool
    found = shutil.which(tool)
    return tool if found is not None and Path(found).resolve() == mine.resolve() else str(mine)


def _add_door_arguments(parser: argparse.ArgumentParser) -> None:
    door = parser.add_mutually_exclusive_group()
    door.add_argument("--url", help=URL_HELP)
    door.add_argument(
        "--local", action="store_true", help="run in this process against ORCHESTRATOR_DATABASE_URL, no API"
    )
    parser.add_argument("--token", help="bearer token (default: ORCHESTRATOR_API_TOKEN)")


def _end_at_once_on_interrupt() -> None:
    """Ctrl-C ends the command at once with 130, wherever it lands, until a process's runtime takes signals
    over for an orderly stop (`dev`, `worker`, `api`, once they run).

    Not by unwinding through asyncio: a print blocked on a full stdout pipe retries its write after the
    signal's handler (PEP 475) and never reaches the cancellation, and the interpreter's own exit flushes
    stdout, which blocks the same way. Every line is flushed as it is printed, so none is cut short by this.
    """

    def interrupted(_signum: int, _frame: FrameType | None) -> None:
        os._exit(EXIT_INTERRUPTED)

    signal.signal(signal.SIGINT, interrupted)


def _inspect(args: argparse.Namespace, settings: Settings) -> int:
    """`status` and `events`: the same door choice and exit codes as `call`."""
    import asyncio

    from orchestrator.core.errors import CommandError
    from orchestrator.dev.inspect import command_client, format_event, format_status, session_status, tail_events

    misconfigured, away = _door_errors(args)

    def emit(event: Mapping[str, Any]) -> None:
        print(json.dumps(event, ensure_ascii=False) if args.json else format_event(event), flush=True)

    async def run() -> None:
        async with command_client(settings, url=args.url, token=args.token, local=args.local) as client:
            if args.subcommand == "status":
                status = await session_status(client, args.session)
                print(json.dumps(status, ensure_ascii=False, indent=2) if args.json else format_status(status))
            else:
                await tail_events(
                    client,
                    args.session,
                    emit,
                    after=args.after,
                    types=args.types,
                    follow=args.follow,
                    reconnect=not args.exit_on_disconnect,
                    on_gap=lambda message: print(f"orchestrator events: {message}", file=sys.stderr, flush=True),
                )

    try:
        asyncio.run(run())
    except CommandError as err:
        if args.subcommand == "events":  # its stdout is the events': the refusal goes with its notices
            print(f"orchestrator events: {err.code}: {err.message}", file=sys.stderr, flush=True)
        else:
            _print_reply(err.reply())
        return _exit_for(err.reply())
    except misconfigured as err:
        print(f"orchestrator {args.subcommand}: {err}", file=sys.stderr)
        return EXIT_USAGE
    except away as err:
        print(f"orchestrator {args.subcommand}: {_away(err, args, settings)}", file=sys.stderr)
        return EXIT_UNREACHABLE
    return EXIT_SUCCESS


def _door_errors(args: argparse.Namespace) -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """What a command line's door fails with, as (misconfigured: exit 2, out of reach: exit 3): the HTTP door
    cannot reach the API; the in-process one (`--local`) may be misconfigured or not reach the database. Only
    the in-process door imports the runtime."""
    import httpx

    if not args.local:
        return (), (httpx.TransportError,)
    from orchestrator.dev.runtime import ConfigurationError, TemporalUnreachable
    from orchestrator.store.connection import DatabaseUnreachable, DatabaseUrlInvalid

    return (ConfigurationError, DatabaseUrlInvalid), (httpx.TransportError, DatabaseUnreachable, TemporalUnreachable)


def _away(err: Exception, args: argparse.Namespace, settings: Settings) -> str:
    """Why a door could not be used: the database's own message, or the API that did not answer, named (the default
    one is found by a rule the user may not have in mind: `settings_api_url`)."""
    import httpx

    from orchestrator.dev.inspect import settings_api_url

    if not isinstance(err, httpx.TransportError):
        return str(err)
    return f"cannot reach the API at {args.url or settings_api_url(settings)}: {err!r}"


def _keys(args: argparse.Namespace, settings: Settings) -> int:
    """`keys create | list | revoke`: the key commands through the same doors and exit codes as `call`."""
    import asyncio

    from orchestrator.dev.inspect import command_client, format_keys

    body: dict[str, Any] = {"command": f"{args.keys_action}_api_key" if args.keys_action != "list" else "list_api_keys"}
    if args.keys_action == "create":
        body |= {"name": args.name, "scopes": args.scopes}
        if args.requests_per_second is not None:
            body["requests_per_second"] = args.requests_per_second
        if args.expires_at is not None:
            body["expires_at"] = args.expires_at
    elif args.keys_action == "revoke":
        body["name"] = args.name

    async def run() -> dict[str, Any]:
        async with command_client(settings, url=args.url, token=args.token, local=args.local) as client:
            return await client.command(body)

    misconfigured, away = _door_errors(args)
    try:
        reply = asyncio.run(run())
    except misconfigured as err:
        print(f"orchestrator keys: {err}", file=sys.stderr)
        return EXIT_USAGE
    except away as err:
        print(f"orchestrator keys: {_away(err, args, settings)}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if args.keys_action == "list" and not args.json and reply.get("status") == "success":
        print(format_keys(reply["keys"]), flush=True)
    else:
        _print_reply(reply)
    return _exit_for(reply)


def _call(args: argparse.Namespace, settings: Settings) -> int:
    """`call --local`: the command in this process, against the settings' database."""
    import asyncio

    # Imported here: the platform and its store are needed only in-process.
    from orchestrator.dev.runtime import ConfigurationError, TemporalUnreachable, run_local_command
    from orchestrator.store.connection import DatabaseUnreachable, DatabaseUrlInvalid

    body = _read_command(args)
    if body is None:
        return EXIT_USAGE
    try:
        reply = asyncio.run(run_local_command(settings, body))
    except (ConfigurationError, DatabaseUrlInvalid) as err:
        print(f"orchestrator call: {err}", file=sys.stderr)
        return EXIT_USAGE
    except (DatabaseUnreachable, TemporalUnreachable) as err:
        print(f"orchestrator call: {err}", file=sys.stderr)
        return EXIT_UNREACHABLE
    _print_reply(reply)
    return _exit_for(reply)


def _call_help(usage: str, name: str) -> int:
    """`call --help [COMMAND]`: the call's usage and the commands, or one command's arguments."""
    from orchestrator.commands import COMMANDS
    from orchestrator.commands.reference import reference, summary_of
    from orchestrator.commands.reference_text import command_help
    from orchestrator.commands.registry import unknown_command

    if not name:
        print(usage)
        print("commands:")
        for command_name in sorted(COMMANDS):
            first = summary_of(COMMANDS[command_name]).split(". ")[0].split("; ")[0].rstrip(".")
            print(f"  {command_name:<24}{textwrap.shorten(first, 74, placeholder='...')}")
        return EXIT_SUCCESS
    if name not in COMMANDS:
        print(f"orchestrator call: {unknown_command(name).message}", file=sys.stderr)
        return EXIT_USAGE
    print(command_help(reference(name)))
    return EXIT_SUCCESS


def _call_fast(args: argparse.Namespace) -> int:
    """`call` over HTTP: the standard library only, no settings model, no event loop."""
    from orchestrator.plain_http import BadSetting, Unreachable, door_from_env, post_command

    body = _read_command(args)
    if body is None:
        return EXIT_USAGE
    try:
        url, token = door_from_env()
    except BadSetting as err:
        print(f"orchestrator call: {err}", file=sys.stderr)
        return EXIT_USAGE
    url = args.url or url
    try:
        reply = post_command(url, args.token or token, body)
    except Unreachable as err:
        print(f"orchestrator call: cannot reach the API at {url}: {err}", file=sys.stderr)
        return EXIT_UNREACHABLE
    _print_reply(reply)
    return _exit_for(reply)


def _exit_for(reply: dict[str, Any]) -> int:
    """0 for a success; 3 for `unavailable` (the platform's database or Temporal out of reach: as for an API
    out of reach, a script tries again later); 1 for any other error reply."""
    if reply.get("status") == "success":
        return EXIT_SUCCESS
    return EXIT_UNREACHABLE if reply.get("error") == "unavailable" else EXIT_ERROR_REPLY


def _read_command(args: argparse.Namespace) -> Any:
    """The command's JSON (from the argument, or stdin for `-`), or None once an error reply is printed."""
    from orchestrator.core.json_checks import not_json

    text = sys.stdin.read() if args.json == "-" else args.json
    try:
        return json.loads(text, parse_constant=not_json)
    except ValueError as err:
        _print_reply({"status": "error", "error": "invalid_request", "message": f"command: not valid JSON ({err})"})
        return None


def main(argv: list[str] | None = None) -> int:
    """The command line. A reader that stops reading (`orchestrator events | head`) ends the command quietly, as
    it ends any Unix tool, with no traceback."""
    if argv is None:  # the command line's own process, not a caller's (a test's) that passes arguments
        _end_at_once_on_interrupt()
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
        runtime = sys.modules.get("orchestrator.dev.runtime")
        if argv is None and runtime is not None and runtime.temporal_connect_failed:
            # What the command started has stopped (its event loop has returned) and its message is out: no
            # finalizing, which the failed connect's own thread may abort (`runtime.temporal_connect_failed`).
            sys.stderr.flush()
            os._exit(code)
        return code
    except BrokenPipeError:
        # The interpreter's exit would flush stdout into the closed pipe again: point it at nothing first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "local", False) and (getattr(args, "token", None) or getattr(args, "url", None)):
        # In this process there is no door and no key: every command is the deployment's own. A key given
        # beside it would be ignored, and a reader would take its scopes for held.
        given = "--token" if getattr(args, "token", None) else "--url"
        print(
            f"orchestrator {args.subcommand}: {given} is for the API; --local runs in this process with the"
            " deployment's own rights and no key: leave one of them out",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if getattr(args, "url", None):
        from orchestrator.plain_http import BadSetting, checked_url

        try:
            checked_url(args.url, "--url")
        except BadSetting as err:
            print(f"orchestrator {args.subcommand}: {err}", file=sys.stderr)
            return EXIT_USAGE
    if "token" in vars(args) and not getattr(args, "local", False):
        from orchestrator.plain_http import BadSetting, authorization, door_from_env

        # A token no header can carry is refused here, naming where it came from, never shown: the send's own
        # error would print it.
        try:
            named, token = ("--token", args.token) if args.token else ("ORCHESTRATOR_API_TOKEN", door_from_env()[1])
            authorization(token)
        except (BadSetting, ValueError) as err:
            message = str(err) if isinstance(err, BadSetting) else str(err).replace("token", named, 1)
            print(f"orchestrator {args.subcommand}: {message}", file=sys.stderr)
            return EXIT_USAGE
    if args.subcommand == "call":
        if args.help is not None:
            # `call write_object --help` asks about the command named where the JSON would be.
            return _call_help(args.usage(), args.help or (args.json or "").strip())
        if args.json is None:
            print("orchestrator call: the command's JSON is required (or --help [COMMAND])", file=sys.stderr)
            return EXIT_USAGE
        if not args.local:
            return _call_fast(args)
    if args.subcommand == "new":
        return _new(args)
    if args.subcommand == "mcp":
        return _mcp(args)
    from orchestrator.config import BadSettings, settings_from_env

    try:
        settings = settings_from_env()
    except BadSettings as err:
        print(f"orchestrator {args.subcommand}: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.subcommand == "call":
        return _call(args, settings)
    if args.subcommand in ("status", "events"):
        return _inspect(args, settings)
    if args.subcommand == "keys":
        return _keys(args, settings)
    if args.subcommand == "plan":
        return _plan(args, settings)
    if args.subcommand == "restored":
        return _restored(args, settings)
    return _serve(args, settings)


def _mcp(args: argparse.Namespace) -> int:
    """`mcp`: serve until stdin closes (stdio) or the process is stopped (HTTP). Over stdio, stdout is the
    protocol's: nothing else is printed there."""
    import asyncio

    from orchestrator.mcp_server import McpDoor
    from orchestrator.plain_http import BadSetting, door_from_env

    try:
        url, token = door_from_env()
    except BadSetting as err:
        print(f"orchestrator mcp: {err}", file=sys.stderr)
        return EXIT_USAGE
    door = McpDoor(args.url or url, args.token or token)
    if args.http is None:
        asyncio.run(door.run_stdio())
        return EXIT_SUCCESS
    print(
        f"mcp          http://{args.host}:{args.http}/mcp  (calls {door.url} as its key)", file=sys.stderr, flush=True
    )
    try:
        asyncio.run(door.run_http(args.host, args.http))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_SUCCESS


def _restored(args: argparse.Namespace, settings: Settings) -> int:
    """`restored [--temporal-only]`: the restored database made ready for the platform (`store/restored.py`), and
    what was done, a line a part."""
    import asyncio

    import asyncpg

    from orchestrator.core.database_schema import checked_schema
    from orchestrator.store.connection import DatabaseUnreachable, DatabaseUrlInvalid
    from orchestrator.store.restored import NotAPlatformDatabase, mark_restored

    url = args.database_url or settings.database_direct_url or settings.database_url
    if not url:
        print(
            "orchestrator restored: which database was restored? --database-url URL, or set ORCHESTRATOR_DATABASE_URL",
            file=sys.stderr,
        )
        return EXIT_USAGE
    # The settings' pattern lets a name of PostgreSQL's own (`pg_*`) through; the platform's check does not.
    try:
        schema = checked_schema(settings.database_schema)
    except ValueError as err:
        print(f"orchestrator restored: {err} (ORCHESTRATOR_DATABASE_SCHEMA)", file=sys.stderr)
        return EXIT_USAGE
    try:
        done = asyncio.run(mark_restored(url, schema, jump_event_ids=not args.temporal_only))
    except (NotAPlatformDatabase, DatabaseUrlInvalid) as err:
        print(f"orchestrator restored: {err}", file=sys.stderr)
        return EXIT_USAGE
    except DatabaseUnreachable as err:
        print(f"orchestrator restored: {err}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except asyncpg.PostgresError as err:
        print(
            f"orchestrator restored: PostgreSQL refused ({type(err).__name__}: {err}); nothing was changed",
            file=sys.stderr,
        )
        return EXIT_ERROR_REPLY
    _print_restored(done, url, args.temporal_only)
    return EXIT_SUCCESS


def _print_restored(done: Restored, url: str, temporal_only: bool) -> None:
    from orchestrator.store.connection import database_place

    _announce(f"database     {done.database} at the {database_place(url)}, schema {done.schema}")
    if temporal_only:
        _announce(f"event ids    left as they were (--temporal-only): the next is {done.next_event_id}")
    else:
        _announce(
            f"event ids    the next was {done.next_event_id_before}, now {done.next_event_id}: past any id the"
            " interval lost with the restore drew"
        )
    _announce(f"schedules    {done.schedules_marked} marked to be made again (by the workers' upkeep, once they run)")


def _plan(args: argparse.Namespace, settings: Settings) -> int:
    """`plan --app M`: the app's declarations against the platform's, one line a change (none: nothing to do)."""
    import asyncio

    from orchestrator.app_loader import AppLoadError
    from orchestrator.dev.runtime import ConfigurationError, plan_app
    from orchestrator.store.connection import DatabaseUnreachable, DatabaseUrlInvalid

    if args.data_dir is not None:
        settings = settings.model_copy(update={"data_dir": args.data_dir})
    try:
        shown = asyncio.run(plan_app(settings, args.app))
    except (ConfigurationError, AppLoadError, DatabaseUnreachable, DatabaseUrlInvalid) as err:
        print(f"orchestrator plan: {err}", file=sys.stderr)
        return EXIT_USAGE
    for line in shown.changes:
        print(line)
    if not shown.changes:
        print("nothing to change: the platform holds what the app declares")
    for note in shown.notes:
        print(note)
    return EXIT_SUCCESS


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    """`dev`, `worker` and `api`: run until Ctrl-C or SIGTERM, then stop in order (see `runtime`)."""
    import asyncio
    import logging

    from orchestrator.app_loader import AppLoadError
    from orchestrator.dev.embedded import EmbeddedServerError
    from orchestrator.dev.runtime import ConfigurationError, TemporalUnreachable, run_api, run_dev, run_worker
    from orchestrator.store.connection import DatabaseUnreachable, DatabaseUrlInvalid

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if settings.access_log:
        logging.getLogger("orchestrator.access").setLevel(logging.INFO)
    updates: dict[str, Any] = {}
    if getattr(args, "data_dir", None) is not None:
        updates["data_dir"] = args.data_dir
    if getattr(args, "http_port", None) is not None:
        updates["http_port"] = args.http_port
    if getattr(args, "host", None) is not None:
        updates["http_host"] = args.host
    settings = settings.model_copy(update=updates)
    try:
        if args.subcommand == "dev":
            asyncio.run(run_dev(settings, args.app, announce=_announce, quiet=args.quiet, reload=args.reload))
        elif args.subcommand == "worker":
            asyncio.run(run_worker(settings, args.app, announce=_announce, health_port=args.health_port))
        else:
            asyncio.run(run_api(settings, announce=_announce))
    except (
        ConfigurationError,
        AppLoadError,
        DatabaseUrlInvalid,
        EmbeddedServerError,
        DatabaseUnreachable,
        TemporalUnreachable,
        OSError,
    ) as err:
        print(f"orchestrator {args.subcommand}: {err}", file=sys.stderr)
        return EXIT_USAGE if isinstance(err, ConfigurationError | AppLoadError | DatabaseUrlInvalid) else 1
    except (KeyboardInterrupt, asyncio.CancelledError):
        return EXIT_INTERRUPTED
    return EXIT_SUCCESS


if __name__ == "__main__":
    sys.exit(main())
