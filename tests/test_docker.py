"""The deployment files, checked without a Docker engine: the compose file's services,
their order on health, healthchecks, commands and settings; the images' install steps.
docker/compose-check.sh runs them for real; .ci/run installs and starts a Docker engine
for it."""

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


def _stages(lines: list[str]) -> list[list[str]]:
    stages: list[list[str]] = []
    for line in lines:
        if line.startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def test_the_image_builds_on_a_debian_base_non_root_and_installs_the_repository() -> None:
    lines = _instructions(DOCKERFILE)
    # The base is a build argument: a registry's Debian, or one built locally; both stages
    # (the build, with the compiler, and the image) are on it.
    assert lines[0] == "ARG BASE_IMAGE=debian:bookworm-slim"
    build, image = _stages(lines)
    assert build[0] == "FROM ${BASE_IMAGE} AS build" and image[0] == "FROM ${BASE_IMAGE}"
    users = [line.split()[1] for line in image if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    build_runs = [line for line in build if line.startswith("RUN ")]
    runs = [line for line in image if line.startswith("RUN ")]
    # Debian's Python in a virtual environment on PATH; the compiler only in the build
    # stage (the rules judge's scanners, setup.py), no apt cache left in either.
    assert any("apt-get install" in r and "python3-venv" in r and " gcc " in r for r in build_runs)
    assert any("python3 -m venv /opt/venv" in r for r in build_runs)
    assert any("apt-get install" in r and "python3 " in r for r in runs)
    assert not any(word in r for r in runs for word in (" gcc", "python3-dev", "COPY . "))
    for r in build_runs + runs:
        if "apt-get install" in r:
            assert "apt-get clean" in r and "rm -rf /var/lib/apt/lists/*" in r, r
    for stage in (build, image):
        assert any(line.startswith("ENV ") and "PATH=/opt/venv/bin:$PATH" in line for line in stage)
    # The dependencies from pyproject.toml alone (its base dependencies: no extra, no
    # torch; less the repository's own distributions, built from the checkout), then the
    # repository's wheels from the whole context, every scanner compiled.
    copies = [line for line in build if line.startswith("COPY ")]
    assert copies == ["COPY pyproject.toml ./", "COPY . ./"]
    deps = build.index(copies[0]) + 1
    assert "tomllib" in build[deps] and "['dependencies']" in build[deps]
    assert "judge[-_.]service" in build[deps] and "pip install -r" in build[deps]
    assert "[" not in build[deps].split("pip install", 1)[1]
    wheels = build[build.index(copies[1]) + 1]
    assert "pip wheel --no-deps -w /wheels" in wheels and "./client" in wheels
    assert "_*.pyx" in wheels and ".so" in wheels  # the extensions are optional in setup.py
    # The image: the build stage's environment and wheels, installed and checked; no source
    # tree in /app to shadow the installed packages (the compiled scanners).
    assert "COPY --from=build /opt/venv /opt/venv" in image
    assert "COPY --from=build /wheels /tmp/wheels" in image
    (install,) = [r for r in runs if "pip install" in r]
    assert "pip install /tmp/wheels/*.whl" in install and "pip check" in install
    assert "glob('_*.so')" in install and "import_module" in install
    own = [line for line in image if line.startswith("COPY ") and "--from" not in line]
    assert own == ["COPY examples/ examples/"] and "WORKDIR /app" in image
    for line in own:  # everything copied exists in the repository
        for source in line.split()[1:-1]:
            assert (ROOT / source).exists(), source
    # The image installs the same package CI installs; the prompts travel inside it
    # (package data), and the examples' tokenizer that judge.env allows beside it.
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -q -e '.[dev,probe,trainers," in ci
    assert not any("JUDGE_LLM_PROMPTS_DIR" in line for line in lines)
    assert (ROOT / "examples" / "tokenizer" / "tokenizer.json").is_file()
    assert "redis" in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_the_build_context_leaves_out_what_the_image_never_needs() -> None:
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    for folder in (".venv/", ".git/", "tests/", "docs/", "bench/", ".ci/"):
        assert folder in ignored, folder
    # The image's sources stay in: the packages, setup.py's inputs, the examples.
    for kept in ("judge_service", "sandbox", "examples", "pyproject.toml", "setup.py"):
        assert not any(line.rstrip("/") == kept for line in ignored), kept
    # docker/compose-check.sh sends a tar (the daemon applies no .dockerignore to one):
    # it takes the top-level names of .dockerignore out itself and adds the Dockerfile.
    text = (ROOT / "docker" / "compose-check.sh").read_text(encoding="utf-8")
    assert ".dockerignore" in text and ":(exclude)" in text
    assert "printf 'docker/Dockerfile\\0'" in text


def test_the_redis_image_uses_debians_redis_on_the_same_base() -> None:
    lines = _instructions(REDIS_DOCKERFILE)
    assert lines[:2] == ["ARG BASE_IMAGE=debian:bookworm-slim", "FROM ${BASE_IMAGE}"]
    assert any(line.startswith("RUN ") and "redis-server" in line for line in lines)
    assert "USER redis" in lines


def test_ci_runs_the_compose_check_and_installs_what_it_needs() -> None:
    script = ROOT / "docker" / "compose-check.sh"
    assert script.stat().st_mode & 0o111  # executable
    text = script.read_text(encoding="utf-8")
    assert "trap cleanup EXIT" in text and "down -v" in text
    assert "docker kill" in (ROOT / "docker" / "compose_check.py").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "docker info" in ci and "docker/compose-check.sh" in ci
    assert ci.index("pytest") < ci.index("docker/compose-check.sh")
    compose = ci[ci.index("# docker compose, for real") :]
    # Debian's engine, Compose v1 (no v2 plugin in Debian) and debootstrap for the base.
    for package in ("docker.io", "docker-compose", "debootstrap"):
        assert f"docker_packages+=({package})" in compose, package
    assert 'apt-get install -y -qq "${docker_packages[@]}"' in compose
    assert "dockerd >/tmp/ci-dockerd.log 2>&1 &" in compose
    # Skipped only on request; no engine is a failure, not a skip.
    assert compose.count("skipped") == 1 and 'JUDGE_COMPOSE_CHECK:-auto}" = skip' in compose
    assert "FAILED: no Docker engine answers" in compose and 'exit "$compose_rc"' in compose
