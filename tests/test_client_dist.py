"""The light client distribution, judge-service-client (client/ of this repository): its
wheel, built from a copy of client/, installed with its four core dependencies alone into
a fresh venv outside the repository (pip resolves them from the configured index), loads
no server dependency and talks to a live service; a second fresh venv with the trainers'
extras imports every integration from the wheel and runs the README's trainer snippets,
TRL's included, against a live service, with the same answers as the server's re-exports.

The server's own names for these modules (``judge_service.client``, ``.schemas``,
``.bounds``, ``.labels``, ``.integrations.<name>``) re-export the client's, one object per
name: checked here too.
"""

from __future__ import annotations

import ast
import email.parser
import importlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import judge_service_client
import numpy as np
import pytest

from judge_service.api.app import create_app
from judge_service.client import JudgeClient, to_padded
from judge_service.config import Settings
from tests.conftest import EXAMPLES, LiveServer
from tests.readme_snippets import readme_block

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "client"
CORE = {"httpx", "numpy", "pydantic", "pybase64"}
EXTRAS = {"trl", "verl", "openrlhf", "slime", "skyrl", "prime-rl"}
INTEGRATIONS = ("trl", "verl", "openrlhf", "slime", "skyrl", "prime_rl")
# What the server needs and a trainer that only wants the client must not pay for.
SERVER_DEPS = (
    "fastapi",
    "uvicorn",
    "starlette",
    "transformers",
    "tokenizers",
    "sympy",
    "anthropic",
    "openai",
    "redis",
    "RestrictedPython",
    "math_verify",
    "torch",
    "judge_service",
)
# The fresh venv's pip installs: the trainer stack from the index takes a minute or two.
INSTALL_TIMEOUT = 900

CLIENT_ONLY = f"""
import json, sys
from importlib.util import find_spec
import judge_service_client, judge_service_client.client
from judge_service_client.client import arrays, async_, calls, errors, sync, wire
import judge_service_client.schemas, judge_service_client.bounds, judge_service_client.labels
import judge_service_client.integrations, judge_service_client.integrations.prime_rl
server = {SERVER_DEPS!r}
print(json.dumps({{
    "file": judge_service_client.__file__,
    "loaded": sorted(m for m in server if m in sys.modules),
    "installed": sorted(m for m in server if find_spec(m) is not None),
    "simd": arrays.b64decode is arrays.B64_DECODERS.get("pybase64"),
}}))
"""

LIVE = """
import asyncio, json, os, sys
from judge_service_client.client import (
    AsyncJudgeClient, InvalidRequestError, JudgeClient, credit_array, to_padded,
)
url, rollouts = os.environ["JUDGE_URL"], json.loads(sys.stdin.read())
with JudgeClient(url, max_batch=3) as client:
    batch = client.judge_batch(rollouts, {"credit_encoding": "base64-f32", "lambda": 0.5})
    try:
        n = len(rollouts[0]["response_token_ids"])
        client.judge({**rollouts[0], "response_mask": [1] * (n - 1)})
        refused = None
    except InvalidRequestError as exc:
        refused = [exc.status_code, exc.field]

async def one():
    async with AsyncJudgeClient(url) as client:
        return await client.judge(rollouts[1], {"credit_encoding": "spans"})

single = asyncio.run(one())
print(json.dumps({
    "statuses": [r.status for r in batch.results],
    "padded": to_padded(batch.results, padding_side="left").tolist(),
    "async": credit_array(single).tolist(),
    "refused": refused,
}))
"""

TINY_MODEL = """
import sys
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
tokenizer.pad_token = tokenizer.eos_token
torch.manual_seed(0)
config = LlamaConfig(
    vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
    num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
    bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
    pad_token_id=tokenizer.pad_token_id,
)
LlamaForCausalLM(config).save_pretrained(sys.argv[2])
tokenizer.save_pretrained(sys.argv[2])
"""

SNIPPETS = """
import importlib, json, sys
from importlib.util import find_spec
def plain(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
given = json.loads(sys.stdin.read())
files = [importlib.import_module(name).__file__ for name in given["modules"]]
advantages = {}
for name, code in given["blocks"].items():
    namespace = {"__name__": f"readme_{name}"}
    exec(compile(code, f"README.md[{name}]", "exec"), namespace)
    advantages[name] = plain(namespace["advantages"])
server = find_spec("judge_service") is not None
print(json.dumps({"files": files, "server": server, "advantages": advantages}))
"""


def _run(command: list[str], timeout: float = 180, **kwargs: Any) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, f"{command[:6]} failed:\n{done.stdout}\n{done.stderr}"
    return str(done.stdout)


def build_client_wheel(tmp_path: Path) -> Path:
    """judge-service-client's wheel, built from a copy of client/ (the checkout gets no
    build/ or egg-info), with no dependency: ``pip wheel --no-deps ./client``."""
    src = tmp_path / "client-src"
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    shutil.copytree(CLIENT, src, ignore=junk)
    dist = tmp_path / "client-dist"
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist)]
    # This venv's setuptools builds it offline in seconds where it is new enough for
    # client/pyproject.toml (an SPDX license: >= 77); else the isolated build.
    setuptools = importlib.metadata.version("setuptools").split(".")[0]
    if setuptools.isdigit() and int(setuptools) >= 77:
        command += ["--no-build-isolation", "--no-index"]
    _run([*command, str(src)])
    (wheel,) = dist.glob("judge_service_client-*.whl")
    return wheel


def _fresh_venv(env_dir: Path, *requirements: str) -> Path:
    """A venv without pip, `requirements` installed into it by this venv's pip (the
    configured index and find-links); returns its python."""
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    _run([*pip, *requirements], timeout=INSTALL_TIMEOUT)
    return python


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without what points into the checkout or configures the service."""
    skip = ("JUDGE_", "PYTHON", "VIRTUAL_ENV", "VERL_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)
    return env


def _client_block(name: str) -> str:
    """The README's snippet NAME with the server's import paths for the client's modules
    (judge_service.client, judge_service.integrations) spelled as the client's."""
    code = re.sub(
        r"\bjudge_service\.(client|integrations)\b", r"judge_service_client.\1", readme_block(name)
    )
    assert "judge_service." not in code, f"README's {name} snippet imports the server"
    return code


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_client_wheel(tmp_path_factory.mktemp("client-wheel"))


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cwd of every command in a fresh venv: outside the repository."""
    directory = tmp_path_factory.mktemp("client-work")
    assert not directory.is_relative_to(ROOT)
    return directory


@pytest.fixture(scope="module")
def client_python(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the client wheel and its core dependencies, nothing else."""
    return _fresh_venv(tmp_path_factory.mktemp("client-venv") / "venv", str(wheel))


@pytest.fixture(scope="module")
def trainers_python(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv with the wheel and every trainer's extra (torch pinned to the CPU
    wheel first, as the README says), then verl itself with --no-deps. Removed after the
    module: it holds about 1.5 GB."""
    env_dir = tmp_path_factory.mktemp("trainers-venv") / "venv"
    extras = ",".join(sorted(EXTRAS))
    python = _fresh_venv(env_dir, "torch==2.13.0", f"{wheel}[{extras}]")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    _run([*pip, "verl==0.9.1"], timeout=INSTALL_TIMEOUT)
    yield python
    shutil.rmtree(env_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    """The real service (rules judge) on a loopback port; Settings() reads the tokenizer
    roots the session's fixture sets (pytest's temp directory and the examples)."""
    settings = Settings(default_tokenizer=str(EXAMPLES / "tokenizer"), max_rollouts_per_batch=3)
    with LiveServer(create_app(settings)) as live:
        yield live.url


def test_the_wheel_holds_the_client_alone(wheel: Path) -> None:
    """Four core dependencies, one extra per trainer, every module of client/ and py.typed,
    and none of the server; the server pins this very version."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(archive.read(meta).decode())
    core = {
        re.split(r"[ <>=!;\[]", r, maxsplit=1)[0].lower()
        for r in metadata.get_all("Requires-Dist") or []
        if "extra ==" not in r
    }
    assert core == CORE
    assert set(metadata.get_all("Provides-Extra") or []) == EXTRAS
    assert metadata["Name"] == "judge-service-client" and metadata["License-Expression"] == (
        "Apache-2.0"
    )
    sources = {
        str(p.relative_to(CLIENT))
        for p in (CLIENT / "judge_service_client").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert "judge_service_client/py.typed" in sources
    assert {n for n in names if not n.startswith("judge_service_client-")} == sources
    server = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert f"judge-service-client=={metadata['Version']}" in server["dependencies"]
    assert metadata["Version"] == judge_service_client.__version__


@pytest.mark.slow
def test_the_client_alone_loads_no_server_dependency(client_python: Path, work: Path) -> None:
    out = json.loads(_run([str(client_python), "-c", CLIENT_ONLY], cwd=work, env=_clean_env()))
    assert Path(out["file"]).is_relative_to(client_python.parent.parent), out
    assert out["loaded"] == [] and out["installed"] == [], out
    assert out["simd"], "pybase64, a core dependency, decodes base64-f32"


@pytest.mark.slow
def test_the_installed_client_against_a_live_service(
    client_python: Path,
    work: Path,
    service: str,
    example_rollouts: list[dict[str, Any]],
) -> None:
    """The fresh venv's clients (sync, split batches, async, an error) against the real
    service give what the server's own re-exported client gets; the README's prime-rl
    snippet (numpy only, no trainer) runs there too."""
    rollouts = [{k: v for k, v in r.items() if k != "tokenizer"} for r in example_rollouts[:7]]
    env = _clean_env(JUDGE_URL=service)
    out = json.loads(
        _run([str(client_python), "-c", LIVE], cwd=work, env=env, input=json.dumps(rollouts))
    )
    with JudgeClient(service, max_batch=3) as client:
        batch = client.judge_batch(rollouts, {"credit_encoding": "base64-f32", "lambda": 0.5})
    assert out["statuses"] == [r.status for r in batch.results] and "ok" in out["statuses"]
    expected = to_padded(batch.results, padding_side="left")
    assert np.any(expected) and np.array_equal(np.asarray(out["padded"], np.float32), expected)
    assert len(out["async"]) == len(rollouts[1]["response_token_ids"])
    assert out["refused"] == [422, "rollout.response_mask"]

    given = {"modules": [], "blocks": {"prime-rl": _client_block("prime-rl")}}
    script = [str(client_python), "-c", SNIPPETS]
    snippet = json.loads(_run(script, cwd=work, env=env, input=json.dumps(given)))
    assert not snippet["server"] and len(snippet["advantages"]["prime-rl"]) == 3


@pytest.mark.slow
def test_the_integrations_and_readme_snippets_run_from_the_wheel(
    trainers_python: Path, work: Path, service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the extras, every integration module imports from the fresh venv (where the
    server is not installed), and the README's OpenRLHF, SkyRL, slime, prime-rl and verl
    snippets run there against the live service, with what the same snippets give here
    through the server's re-exports (where this venv has the trainers' packages)."""
    names = ["openrlhf", "skyrl", "slime", "prime-rl", "verl"]
    given = {
        "modules": [f"judge_service_client.integrations.{m}" for m in INTEGRATIONS],
        "blocks": {name: _client_block(name) for name in names},
    }
    script = [str(trainers_python), "-c", SNIPPETS]
    env = _clean_env(JUDGE_URL=service)
    fresh = json.loads(_run(script, timeout=300, cwd=work, env=env, input=json.dumps(given)))
    assert not fresh["server"]
    venv_dir = trainers_python.parent.parent
    assert len(fresh["files"]) == len(INTEGRATIONS), fresh["files"]
    assert all(Path(f).is_relative_to(venv_dir) for f in fresh["files"]), fresh["files"]
    assert set(fresh["advantages"]) == set(names)
    assert all(len(v) > 0 for v in fresh["advantages"].values())
    try:
        import torch  # noqa: F401
        import verl.trainer.ppo.core_algos  # noqa: F401
    except ImportError:
        if os.environ.get("JUDGE_REQUIRE_TRAINERS"):
            raise
        return
    monkeypatch.setenv("JUDGE_URL", service)
    for name in names:
        namespace: dict[str, Any] = {"__name__": f"readme_{name}"}
        exec(compile(readme_block(name), f"README.md[{name}]", "exec"), namespace)
        here = namespace["advantages"]
        here = [np.asarray(v) for v in here] if isinstance(here, list) else np.asarray(here)
        assert np.allclose(np.asarray(fresh["advantages"][name]), np.asarray(here)), name


@pytest.mark.slow
def test_readme_trl_snippet_runs_from_the_wheel(
    trainers_python: Path,
    work: Path,
    bpe_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The README's TRL block, imports spelled as the client's, in the fresh venv: TRL
    trains a 2-layer Llama for its 2 steps against the live service, and logs the judge's
    share."""
    model = tmp_path_factory.mktemp("tiny-llama")  # under the server's tokenizer roots
    env = _clean_env()
    _run([str(trainers_python), "-c", TINY_MODEL, str(bpe_dir), str(model)], cwd=work, env=env)
    code = _client_block("trl") + (
        "\nimport json\n"
        "print(json.dumps({'steps': trainer.state.global_step, 'max': trainer.args.max_steps,"
        " 'share': any('judge/share' in e for e in trainer.state.log_history)}))\n"
    )
    with LiveServer(create_app(Settings())) as live:
        env.update(MODEL=str(model), JUDGE_URL=live.url)
        stdout = _run([str(trainers_python), "-c", code], timeout=600, cwd=work, env=env)
    out = json.loads(stdout.strip().splitlines()[-1])
    assert out["steps"] == out["max"] == 2 and out["share"], out


@pytest.mark.parametrize(
    "name",
    [
        "schemas",
        "bounds",
        "labels",
        "client",
        *(f"client.{m}" for m in ("arrays", "async_", "calls", "errors", "sync", "wire")),
        *(f"integrations.{m}" for m in INTEGRATIONS),
    ],
)
def test_the_server_names_re_export_the_one_definition(name: str) -> None:
    """``judge_service.NAME`` exports every public name of ``judge_service_client.NAME``,
    as the same object: nothing is defined twice."""
    if name.startswith("integrations."):
        try:
            importlib.import_module(f"judge_service_client.{name}")
        except ImportError:  # that trainer's extra is not installed here
            if os.environ.get("JUDGE_REQUIRE_TRAINERS"):
                raise
            pytest.skip(f"judge_service_client.{name}: its trainer is not installed")
    shared = importlib.import_module(f"judge_service_client.{name}")
    server = importlib.import_module(f"judge_service.{name}")
    tree = ast.parse(Path(shared.__file__ or "").read_text(encoding="utf-8"))
    defined = set(getattr(shared, "__all__", ()))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {t.id for t in targets if isinstance(t, ast.Name)}
    public = {n for n in defined if not n.startswith("_") and n != "log"}
    assert set(server.__all__) >= public, public - set(server.__all__)
    assert all(getattr(server, n) is getattr(shared, n) for n in server.__all__)
