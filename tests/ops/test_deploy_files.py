"""deploy/: the Compose file, the Kubernetes manifests and the Dockerfile agree with the code.

No container runs here (there is no Docker engine or cluster on the test machines); these checks parse the
files and hold them to what the code really has: the CLI subcommands and flags parse, every
`ORCHESTRATOR_` name is a setting, the ports and probe paths are the ones the processes serve, and the
shutdown budgets leave the worker's drain time to finish.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from orchestrator.cli import _parser
from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.core.retention import Retention
from orchestrator.dev.embedded import TemporalDevServer
from orchestrator.door.api import create_app

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = DEPLOY / "k8s"
DEFAULTS = Settings(database_url=None, temporal_address=None)
API_PORT = DEFAULTS.http_port


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return loaded


def _manifests() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def _one(kind: str, name: str) -> dict[str, Any]:
    [found] = [d for d in _manifests() if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _parses(command: list[str]) -> Any:
    """The command's arguments as `orchestrator` parses them (argparse exits on anything it does not know)."""
    assert command[0] == "orchestrator", command
    return _parser().parse_args(command[1:])


def _is_setting(env_name: str) -> bool:
    name = env_name.removeprefix("ORCHESTRATOR_").lower()
    if "__" in name:
        group, _, field = name.partition("__")
        nested = {"limits": Limits, "retention": Retention}.get(group)
        return nested is not None and field in nested.model_fields
    return name in Settings.model_fields


def _health_port(command: list[str]) -> int:
    return int(_parses(command).health_port)


# The Compose file


def test_compose_runs_every_part() -> None:
    services = _compose()["services"]

    assert {"postgres", "temporal", "temporal-setup", "temporal-ui", "worker", "api"} <= set(services)
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["temporal"]["image"].startswith("temporalio/auto-setup:")
    assert services["temporal"]["environment"]["DB"] == "postgres12"
    assert services["temporal"]["environment"]["POSTGRES_SEEDS"] == "postgres"
    assert services["temporal-ui"]["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert "replicas" in services["worker"]["deploy"]


def test_compose_gives_temporal_the_dynamic_config_the_dev_server_gets() -> None:
    temporal = _compose()["services"]["temporal"]
    path = temporal["environment"]["DYNAMIC_CONFIG_FILE_PATH"]
    [mount] = temporal["volumes"]
    source, target, _mode = mount.split(":")
    assert target == f"/etc/temporal/{path}"
    config = yaml.safe_load((DEPLOY / source).read_text())
    embedded = " ".join(TemporalDevServer(Path("unused"), port=1, ui_port=2).command())
    for key in ("system.enableActivityEagerExecution", "system.enableEagerWorkflowStart"):
        assert config[key] == [{"value": True}]
        assert f"{key}=true" in embedded


def test_compose_commands_are_real_subcommands() -> None:
    services = _compose()["services"]

    worker = _parses(services["worker"]["command"])
    api = _parses(services["api"]["command"])

    assert worker.subcommand == "worker" and worker.app == "examples.missions.app"
    assert (DEPLOY.parent / "examples" / "missions" / "app.py").exists()
    assert api.subcommand == "api"


def test_compose_wires_the_parts_to_each_other() -> None:
    services = _compose()["services"]
    for name in ("worker", "api"):
        env = services[name]["environment"]
        assert env["ORCHESTRATOR_TEMPORAL_ADDRESS"] == "temporal:7233"
        assert "@postgres:5432/" in env["ORCHESTRATOR_DATABASE_URL"]
        assert env["ORCHESTRATOR_API_TOKEN"].startswith("${ORCHESTRATOR_API_TOKEN:?")  # no default token
        assert services[name]["depends_on"]["temporal-setup"]["condition"] == "service_completed_successfully"
    setup = " ".join(services["temporal-setup"]["command"])
    assert "OrchestratorSession OrchestratorListener" in setup
    assert "--type Keyword" in setup


def test_compose_ports_and_health_checks_match_the_processes() -> None:
    services = _compose()["services"]
    api, worker = services["api"], services["worker"]

    assert int(api["environment"]["ORCHESTRATOR_HTTP_PORT"]) == API_PORT
    assert api["environment"]["ORCHESTRATOR_HTTP_HOST"] == "0.0.0.0"
    assert api["ports"] == [f"127.0.0.1:{API_PORT}:{API_PORT}"]
    assert f"127.0.0.1:{API_PORT}/readyz" in " ".join(api["healthcheck"]["test"])
    port = _health_port(worker["command"])
    assert f"127.0.0.1:{port}/healthz" in " ".join(worker["healthcheck"]["test"])
    for service in services.values():  # published on loopback only
        for mapping in service.get("ports", []):
            assert mapping.startswith("127.0.0.1:"), mapping


def test_compose_gives_the_worker_time_to_drain() -> None:
    compose = _compose()
    drain = float(compose["services"]["worker"]["environment"]["ORCHESTRATOR_WORKER_GRACEFUL_SHUTDOWN_SECONDS"])
    grace = compose["services"]["worker"]["stop_grace_period"]

    assert float(grace.removesuffix("s")) > drain


# The Kubernetes manifests


def test_k8s_has_the_deployments_service_config_and_secret() -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for d in _manifests()}

    assert {
        ("Deployment", "orchestrator-worker"),
        ("Deployment", "orchestrator-api"),
        ("Service", "orchestrator-api"),
        ("ConfigMap", "orchestrator-config"),
        ("Secret", "orchestrator-secrets"),
    } <= kinds
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


def test_k8s_secret_holds_the_database_url_and_the_token() -> None:
    secret = _one("Secret", "orchestrator-secrets")

    assert {"ORCHESTRATOR_DATABASE_URL", "ORCHESTRATOR_API_TOKEN"} <= set(secret["stringData"])
    config = _one("ConfigMap", "orchestrator-config")["data"]
    assert not {"ORCHESTRATOR_DATABASE_URL", "ORCHESTRATOR_API_TOKEN", "ORCHESTRATOR_TEMPORAL_API_KEY"} & set(config)


@pytest.mark.parametrize("name", ["orchestrator-worker", "orchestrator-api"])
def test_k8s_deployments_are_complete(name: str) -> None:
    deployment = _one("Deployment", name)
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    container = _container(deployment)

    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert {"cpu", "memory"} <= set(container["resources"]["limits"])
    assert {ref.get("configMapRef", ref.get("secretRef"))["name"] for ref in container["envFrom"]} == {
        "orchestrator-config",
        "orchestrator-secrets",
    }
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] in ports
    assert pod["terminationGracePeriodSeconds"] > 0


def test_k8s_api_probes_and_port_match_the_api() -> None:
    deployment = _one("Deployment", "orchestrator-api")
    container = _container(deployment)
    env = {e["name"]: e["value"] for e in container["env"]}
    # Building the app reads no database: a platform that is only a pool a door may use.
    platform = SimpleNamespace(store=SimpleNamespace(lent_noted=True))
    paths = {route.path for route in create_app(platform, DEFAULTS).routes}  # type: ignore[arg-type, attr-defined]

    assert _parses(container["command"]).subcommand == "api"
    assert int(env["ORCHESTRATOR_HTTP_PORT"]) == API_PORT
    assert env["ORCHESTRATOR_HTTP_HOST"] == "0.0.0.0"
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"http": API_PORT}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"/healthz", "/readyz", "/v1/commands"} <= paths
    service = _one("Service", "orchestrator-api")
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert service["spec"]["ports"] == [{"name": "http", "port": API_PORT, "targetPort": "http"}]


def test_k8s_worker_probes_its_health_port_and_drains_before_the_kill() -> None:
    deployment = _one("Deployment", "orchestrator-worker")
    container = _container(deployment)
    args = _parses(container["command"])
    drain = float(_one("ConfigMap", "orchestrator-config")["data"]["ORCHESTRATOR_WORKER_GRACEFUL_SHUTDOWN_SECONDS"])

    assert args.subcommand == "worker"
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"health": args.health_port}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {e["name"]: e["value"] for e in container["env"]}["ORCHESTRATOR_HTTP_HOST"] == "0.0.0.0"
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > drain
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_k8s_and_compose_run_the_same_image() -> None:
    image = _compose()["services"]["worker"]["image"]

    assert _compose()["services"]["api"]["image"] == image
    for name in ("orchestrator-worker", "orchestrator-api"):
        assert _container(_one("Deployment", name))["image"] == image


# Across the folder


def test_every_orchestrator_variable_in_deploy_is_a_setting() -> None:
    names = set()
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            names |= set(re.findall(r"\bORCHESTRATOR_[A-Z0-9_]+", path.read_text()))

    assert "ORCHESTRATOR_DATABASE_URL" in names
    unknown = sorted(n for n in names if not _is_setting(n))
    assert not unknown, f"not settings in orchestrator/config.py: {unknown}"


def test_the_dockerfile_builds_a_non_root_image_running_the_cli() -> None:
    lines = [line.strip() for line in (DEPLOY / "Dockerfile").read_text().splitlines()]
    instructions = [line for line in lines if line and not line.startswith("#")]

    assert instructions[0] == "FROM python:3.11-slim"
    assert "RUN pip install ." in instructions
    [user] = [line for line in instructions if line.startswith("USER ")]
    assert user.split()[1] not in ("root", "0")
    [cmd] = [line for line in instructions if line.startswith("CMD ")]
    assert _parses(yaml.safe_load(cmd.removeprefix("CMD "))).subcommand == "api"
    for line in instructions:
        if line.startswith("COPY "):
            for source in shlex.split(line)[1:-1]:
                assert (DEPLOY.parent / source).exists(), source
