"""The platform's Temporal workflows: lanes and listener runs.

Workflow files run no code on import beyond definitions; everything they call is the pure core or an
activity. `PLATFORM_WORKFLOWS` is what the worker registers beside the application's workflows.
"""
