"""The deployment files, checked without a Docker engine: the compose file's services,
their order on health, healthchecks, commands and settings; the images' install steps.
docker/compose-check.sh runs them for real where a Docker engine is available."""

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
REDIS_DOCKERFILE = ROOT / "docker" / "redis.Dockerfile"
DEFAULT_ENV = ROOT / "docker" / "judge.env"
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
    base = "${JUDGE_BASE_IMAGE:-debian:bookworm-slim}"  # a local base replaces the registry's
    for name in ("api", "worker"):
        assert services[name]["depends_on"] == {"redis": {"condition": "service_healthy"}}
        assert services[name]["image"] == "judge-service:local"
        build = services[name]["build"]
        assert build == {
            "context": "..", "dockerfile": "docker/Dockerfile", "args": {"BASE_IMAGE": base}
        }  # fmt: skip
        assert (COMPOSE.parent / build["context"] / build["dockerfile"]).is_file()
    redis = services["redis"]
    # Redis is built too (Debian's redis-server on the same base): nothing is pulled.
    assert redis["image"] == "judge-redis:local"
    assert redis["build"] == {
        "context": ".", "dockerfile": "redis.Dockerfile", "args": {"BASE_IMAGE": base}
    }  # fmt: skip
    assert (COMPOSE.parent / redis["build"]["dockerfile"]).is_file()
    assert redis["command"][0] == "redis-server"
    # Debian's redis-server has no config file: protected mode would refuse the other services.
    assert redis["command"][1:3] == ["--protected-mode", "no"] and "ports" not in redis
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


def _env_file(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    pairs = [line.split("=", 1) for line in lines if line.strip() and not line.startswith("#")]
    return {key: value for key, value in pairs}


def _assert_settings(variables: dict[str, Any]) -> None:
    fields = set(Settings.model_fields)
    for variable in variables:
        if variable not in SDK_VARIABLES:
            assert variable.startswith("JUDGE_"), variable
            assert variable.removeprefix("JUDGE_").lower() in fields, variable


def test_environment_names_real_settings(compose: dict[str, Any]) -> None:
    for name in ("api", "worker"):
        service = compose["services"][name]
        environment = service["environment"]
        # `environment` overrides the env files, so it holds only what compose itself owns.
        assert set(environment) <= {"JUDGE_REDIS_URL", "JUDGE_INPROCESS_WORKER"}, environment
        assert environment["JUDGE_REDIS_URL"] == "redis://redis:6379/0"  # the service name
        # The defaults, then the operator's file (Compose v1 wants the two spelled apart).
        assert service["env_file"] == ["judge.env", "${JUDGE_ENV_FILE:-./judge.env}"]
    assert compose["services"]["api"]["environment"]["JUDGE_INPROCESS_WORKER"] == "off"
    defaults = _env_file(DEFAULT_ENV)
    _assert_settings(defaults)
    # The bundled examples name "examples/tokenizer" (relative to /app): allowed by default.
    assert defaults["JUDGE_ALLOWED_TOKENIZERS"] == "examples/tokenizer"
    assert defaults["JUDGE_TOKENIZER_ROOTS"] == "/app/examples"
    assert not set(defaults) & (SDK_VARIABLES | {"JUDGE_API_KEYS"})  # no secret in the repo
    settings = Settings(**{k.removeprefix("JUDGE_").lower(): v for k, v in defaults.items()})
    assert settings.allowed_tokenizers == ["examples/tokenizer"]


def test_the_sandbox_can_build_its_isolation(compose: dict[str, Any]) -> None:
    # unshare() and mount() pass Docker's default seccomp profile only with CAP_SYS_ADMIN
    # in the bounding set; no-new-privileges keeps the non-root process from ever holding it.
    for name in ("api", "worker"):
        service = compose["services"][name]
        assert service["cap_add"] == ["SYS_ADMIN"]
        assert service["security_opt"] == ["no-new-privileges:true"]
        assert "privileged" not in service


def _instructions(path: Path) -> list[str]:
    lines, joined = [], ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        joined += line.strip().removesuffix("\\").strip() + " "
        if not line.rstrip().endswith("\\"):
            lines.append(joined.strip())
            joined = ""
    return lines


def test_the_image_builds_on_a_debian_base_non_root_and_installs_the_repository() -> None:
    lines = _instructions(DOCKERFILE)
    # The base is a build argument: a registry's Debian, or one built locally.
    assert lines[0] == "ARG BASE_IMAGE=debian:bookworm-slim"
    assert lines[1] == "FROM ${BASE_IMAGE}"
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    runs = [line for line in lines if line.startswith("RUN ")]
    # Debian's Python in a virtual environment on PATH.
    assert any("apt-get install" in r and "python3-venv" in r for r in runs)
    assert any("python3 -m venv /opt/venv" in r for r in runs)
    assert any(line.startswith("ENV ") and "PATH=/opt/venv/bin:$PATH" in line for line in lines)
    # The dependencies from pyproject.toml alone (the base ones: no dev or probe extra, no
    # torch), then the package from the repository without them.
    installs = [r for r in runs if "pip install" in r]
    assert len(installs) == 2
    assert re.search(r"pip install \. ", installs[0]) and "[" not in installs[0]
    assert re.search(r"pip install --no-deps \. ", installs[1] + " ")
    copies = [line for line in lines if line.startswith("COPY ")]
    assert copies[0] == "COPY pyproject.toml ./"
    assert lines.index(copies[0]) < lines.index(installs[0]) < lines.index(copies[1])
    for line in copies:  # everything copied exists in the repository
        for source in line.split()[1:-1]:
            assert (ROOT / source).exists(), source
    # The image installs the same package CI installs; the prompts travel inside it (package
    # data), and the examples' tokenizer that judge.env allows beside it.
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -q -e '.[dev,probe,trainers]'" in ci
    assert "COPY judge_service/ judge_service/" in lines
    assert not any("JUDGE_LLM_PROMPTS_DIR" in line for line in lines)
    assert "COPY examples/ examples/" in lines and "WORKDIR /app" in lines
    assert (ROOT / "examples" / "tokenizer" / "tokenizer.json").is_file()
    assert "redis" in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_the_redis_image_uses_debians_redis_on_the_same_base() -> None:
    lines = _instructions(REDIS_DOCKERFILE)
    assert lines[:2] == ["ARG BASE_IMAGE=debian:bookworm-slim", "FROM ${BASE_IMAGE}"]
    assert any(line.startswith("RUN ") and "redis-server" in line for line in lines)
    assert "USER redis" in lines


def test_ci_runs_the_compose_check_only_where_docker_is_usable() -> None:
    script = ROOT / "docker" / "compose-check.sh"
    assert script.stat().st_mode & 0o111  # executable
    text = script.read_text(encoding="utf-8")
    assert "trap cleanup EXIT" in text and "down -v" in text
    assert "docker kill" in (ROOT / "docker" / "compose_check.py").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "docker info" in ci and "docker/compose-check.sh" in ci
    assert ci.index("pytest") < ci.index("docker/compose-check.sh")
