"""`in_schema` moves the platform's qualifiers to another schema and touches nothing else: not a string literal
(an activity's name, a message), not another identifier, not a comment; and the SQL the repository ships
holds no `orchestrator.` in code that it leaves behind."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.schema_names import in_schema
from orchestrator.store.migrate import function_files, migration_files


@pytest.mark.parametrize(
    ("sql", "moved"),
    [
        ("SELECT * FROM orchestrator.events e", 'SELECT * FROM "tenant".events e'),
        (
            "SELECT orchestrator.orchestrator_route_page($1, $2, $3)",
            'SELECT "tenant".orchestrator_route_page($1, $2, $3)',
        ),
        ("INSERT INTO orchestrator.events(id) VALUES (1)", 'INSERT INTO "tenant".events(id) VALUES (1)'),
        ("SELECT NULL::orchestrator.listener_rules", 'SELECT NULL::"tenant".listener_rules'),
        ("v orchestrator.captures%ROWTYPE;", 'v "tenant".captures%ROWTYPE;'),
        ("SELECT 1 FROM Orchestrator.events", 'SELECT 1 FROM "tenant".events'),  # unquoted names fold to lower case
        # A function's body is code.
        (
            "CREATE FUNCTION orchestrator.f() RETURNS int LANGUAGE sql AS $$ SELECT count(*) FROM orchestrator.t $$",
            'CREATE FUNCTION "tenant".f() RETURNS int LANGUAGE sql AS $$ SELECT count(*) FROM "tenant".t $$',
        ),
        ("DO $body$ BEGIN PERFORM orchestrator.g(); END $body$", 'DO $body$ BEGIN PERFORM "tenant".g(); END $body$'),
        # The two literals that are names.
        ("SELECT nextval('orchestrator.event_ids'::regclass)", "SELECT nextval('\"tenant\".event_ids'::regclass)"),
        ("SELECT 'orchestrator' :: regnamespace", "SELECT '\"tenant\"' :: regnamespace"),
    ],
)
def test_a_qualifier_moves_to_the_schema(sql: str, moved: str) -> None:
    assert in_schema(sql, "tenant") == moved


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 'orchestrator.fire'",  # an activity's name
        "SELECT 'orchestrator.events'",  # a literal that is not cast to a name
        "SELECT 'orchestrator'::text, 'orchestrator.x'::text",
        "SELECT E'orchestrator.\\' orchestrator.x'",
        "RAISE EXCEPTION 'orchestrator: 0 % 0'",
        "SELECT orchestrator_route_page(1), orchestrator_x.events, my_orchestrator.events",
        'SELECT "orchestrator".events, "orchestrator.events"',
        "SELECT x.orchestrator.events",  # not a schema qualifier (a column's field, or a catalog's name)
        "SELECT orchestrator . events, orchestrator, orchestrator.1",
        "SELECT 1 -- orchestrator.events\n",
        "SELECT /* orchestrator.events /* nested orchestrator.x */ orchestrator.y */ 1",
        "SELECT $1 || orchestrator_lane",
        "SELECT a$b$c FROM t",
    ],
)
def test_nothing_else_moves(sql: str) -> None:
    assert in_schema(sql, "tenant") == sql


def test_a_literal_inside_a_body_stays_and_a_nested_dollar_body_moves() -> None:
    sql = "AS $$ BEGIN EXECUTE $q$SELECT 1 FROM orchestrator.t$q$; RAISE 'orchestrator.t %', 1; END $$"
    assert in_schema(sql, "tenant") == (
        "AS $$ BEGIN EXECUTE $q$SELECT 1 FROM \"tenant\".t$q$; RAISE 'orchestrator.t %', 1; END $$"
    )


def test_the_default_schema_is_the_same_text() -> None:
    sql = "SELECT * FROM orchestrator.events"
    assert in_schema(sql, "orchestrator") is sql


def test_a_schema_name_that_is_not_plain_is_refused() -> None:
    with pytest.raises(ValueError, match="database_schema"):
        in_schema("SELECT 1 FROM orchestrator.events", 'x"; DROP TABLE y; --')


sql_pieces = st.sampled_from(
    [
        "SELECT ",
        "orchestrator.events",
        "orchestrator_lanes",
        "'orchestrator.fire'",
        "'it''s'",
        '"orchestrator".x',
        "$$",
        "$q$",
        "-- orchestrator.c\n",
        "/* orchestrator.d */",
        " ",
        ", ",
        "::regclass",
        "'orchestrator.event_ids'",
        "(",
        ")",
    ]
)


@given(st.lists(sql_pieces, max_size=30).map("".join), st.sampled_from(["tenant", "orchestrator_two", "user"]))
def test_moving_twice_is_moving_once_and_moving_back_is_the_text(sql: str, schema: str) -> None:
    once = in_schema(sql, schema)
    assert in_schema(once, schema) == once
    # Every qualifier written is the quoted schema: replacing it back gives the text as written.
    assert once.replace(f'"{schema}".', "orchestrator.") == sql


def _code_left(sql: str) -> list[str]:
    """The lines of `sql` moved to another schema that still say `orchestrator.` outside a comment."""
    moved = in_schema(sql, "tenant")
    return [line for line in moved.splitlines() if re.search(r"orchestrator\.", line.split("--")[0])]


def test_the_shipped_function_files_name_no_schema_they_leave_behind() -> None:
    left = {name: _code_left(sql) for name, sql in function_files()}
    assert {name: lines for name, lines in left.items() if lines} == {}


def test_the_shipped_migrations_name_no_schema_they_leave_behind() -> None:
    """Migrations 0001-0026 name tables plainly (each runs with the search path set for its transaction); a
    later one that qualifies its names moves as the function files do."""
    left = {name: _code_left(sql) for _, name, sql in migration_files()}
    assert {name: lines for name, lines in left.items() if lines} == {}
