"""The pure core: filters, lane keys, batch windows, distinct_by, backoff, templates and outcomes.

Everything here is a deterministic function of its inputs. Nothing imports Temporal, the database or
telemetry (ruff's banned-api in this folder and the import-linter contract in pyproject.toml keep it so),
which is what lets the lane workflow call these functions from inside Temporal's sandbox and replay them.
"""
