"""The Temporal Cloud settings reach the connection: mTLS files, an API key, or neither (plain)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.service import TLSConfig

from orchestrator.config import Settings
from orchestrator.engine import worker


@pytest.fixture
def connected(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def fake_connect(target_host: str, **kwargs: Any) -> Client:
        seen.update(kwargs, target_host=target_host)
        return None  # type: ignore[return-value]

    monkeypatch.setattr(worker.Client, "connect", fake_connect)
    return seen


def _settings(**values: Any) -> Settings:
    return Settings(database_url=None, temporal_address=None, **values)


async def test_without_settings_the_connection_is_plain(connected: dict[str, Any]) -> None:
    await worker.connect_temporal("temporal:7233", "default", _settings())

    assert connected["tls"] is None and connected["api_key"] is None
    assert connected["target_host"] == "temporal:7233"


async def test_client_certificate_files_turn_on_mtls(connected: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_bytes(b"CERT")
    (tmp_path / "tls.key").write_bytes(b"KEY")

    await worker.connect_temporal(
        "ns.acct.tmprl.cloud:7233",
        "ns.acct",
        _settings(temporal_tls_cert=tmp_path / "tls.crt", temporal_tls_key=tmp_path / "tls.key"),
    )

    tls = connected["tls"]
    assert isinstance(tls, TLSConfig)
    assert (tls.client_cert, tls.client_private_key, tls.server_root_ca_cert) == (b"CERT", b"KEY", None)
    assert connected["namespace"] == "ns.acct"


async def test_an_api_key_is_passed_and_left_to_the_sdk_to_send_over_tls(
    connected: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCHESTRATOR_TEMPORAL_API_KEY", "key-123")

    await worker.connect_temporal("us-east-1.aws.api.temporal.io:7233", "ns.acct", _settings())

    assert connected["api_key"] == "key-123"
    assert connected["tls"] is None  # the SDK turns TLS on whenever an API key is given
