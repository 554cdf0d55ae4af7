# The newcomer's path: `make run` and `make test` set everything up on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Reinstall only when the dependencies may have changed.
STAMP := $(VENV)/.installed

.PHONY: run test check docs setup clean

# Silent (@): what it prints is the platform's banner alone, as the README shows it.
run: $(STAMP)
	@$(BIN)/orchestrator dev

test: $(STAMP)
	scripts/test

check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# docs/commands.md, the TypeScript client's types and the Python client's reply types from the command registry
# (a test fails when one is out of date).
docs: $(STAMP)
	$(BIN)/python -m orchestrator.reference_doc
	$(BIN)/python -m orchestrator.typescript_types
	$(BIN)/python -m orchestrator.python_types

setup: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

clean:
	rm -rf $(VENV) .orchestrator .pytest_cache .mypy_cache .ruff_cache
