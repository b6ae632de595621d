"""The deployment files, checked without a Docker engine: the compose file's services,
their order on health, healthchecks and commands; the image's install steps."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge_service.api.app import create_app
from judge_service.cli.main import build_parser
from judge_service.config import Settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker" / "compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
SDK_VARIABLES = {"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    return loaded


def _command_line(test: list[str]) -> list[str]:
    assert test[0] == "CMD", test  # exec form: no shell needed in the image
    return test[1:]


def test_services_start_in_order_on_health(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"redis", "api", "worker"}
    for name in ("api", "worker"):
        assert services[name]["depends_on"] == {"redis": {"condition": "service_healthy"}}
        assert services[name]["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}
        assert (COMPOSE.parent / services[name]["build"]["context"] / "docker/Dockerfile").is_file()
    redis = services["redis"]
    assert _command_line(redis["healthcheck"]["test"]) == ["redis-cli", "ping"]
    # Accepted jobs survive a Redis restart: append-only file on a volume, no eviction.
    assert "--appendonly" in redis["command"] and "yes" in redis["command"]
    assert "noeviction" in redis["command"]
    assert any(v.endswith(":/data") for v in redis["volumes"])
    assert "redis-data" in compose["volumes"]


def test_the_worker_scales_and_every_service_has_a_healthcheck(compose: dict[str, Any]) -> None:
    services = compose["services"]
    worker = services["worker"]
    # --scale worker=N needs no fixed name or host port.
    assert "container_name" not in worker and "ports" not in worker
    for name, service in services.items():
        check = service["healthcheck"]
        assert check["interval"] and check["retries"] >= 3, name
    api_check = " ".join(_command_line(services["api"]["healthcheck"]["test"]))
    paths = set(create_app(Settings()).openapi()["paths"])
    (path,) = re.findall(r"127\.0\.0\.1:8000(/\w+)", api_check)
    assert path in paths and path == "/readyz"


def test_commands_are_real_cli_invocations(compose: dict[str, Any]) -> None:
    services = compose["services"]
    parser = build_parser()
    api = parser.parse_args(services["api"]["command"][1:])
    assert api.command == "serve" and api.host == "0.0.0.0" and api.port == 8000
    worker = parser.parse_args(services["worker"]["command"][1:])
    assert worker.command == "worker"
    check = parser.parse_args(_command_line(services["worker"]["healthcheck"]["test"])[1:])
    assert check.command == "worker" and check.healthcheck is True
    assert services["api"]["ports"][0].endswith(":8000")


def test_environment_names_real_settings(compose: dict[str, Any]) -> None:
    fields = set(Settings.model_fields)
    for name in ("api", "worker"):
        environment = compose["services"][name]["environment"]
        assert environment["JUDGE_REDIS_URL"] == "redis://redis:6379/0"  # the service name
        for variable in environment:
            if variable not in SDK_VARIABLES:
                assert variable.startswith("JUDGE_"), variable
                assert variable.removeprefix("JUDGE_").lower() in fields, variable
    assert compose["services"]["api"]["environment"]["JUDGE_INPROCESS_WORKER"] == "off"


def test_the_image_is_slim_non_root_and_installs_the_repository() -> None:
    lines = [
        line.strip()
        for line in DOCKERFILE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert lines[0].startswith("FROM python:3.11-slim")
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert any(re.fullmatch(r"RUN pip install \.", line) for line in lines)
    for line in lines:  # everything copied exists in the repository
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), source
    # The image installs the same package CI installs; the prompts travel beside it.
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -q -e '.[dev,probe]'" in ci
    assert "COPY prompts/ prompts/" in lines and "ENV JUDGE_LLM_PROMPTS_DIR=/app/prompts" in lines
    assert "redis" in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
