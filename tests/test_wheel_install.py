"""The built wheel, installed into a fresh venv outside the repository, judges with the LLM
judge: the prompts are package data, found inside the installed package, not in a checkout.
The checkout keeps them in the top-level prompts/, which installs as ``judge_service.prompts``
(pyproject.toml's package-dir, setup.py); the test harness (tests/harness/) stays out.

The fresh venv gets the wheel only (``--no-deps``); its dependencies come from this
project's venv through a ``.pth`` path line. A path line does not run the ``.pth`` hooks of
the directory it adds, so the project venv's editable install of judge_service stays inert
(asserted: judge_service imports from the fresh venv).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest

from judge_service.config import Settings
from judge_service.judges.llm.llm_judge import build_llm_judge
from judge_service.judges.llm.prompt import DEFAULT_PROMPTS_DIR
from judge_service.trace.tokenizer import TokenizerCache
from tests.harness.scripted import openai_server, submit
from tests.harness.scripted.harness import span
from tests.test_client_dist import build_client_wheel

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
MODEL = "wheel-judge"
# Light on purpose (no judge imports): where the packages and their prompt files are.
PROBE = """
import hashlib, json, judge_service, sandbox
from importlib.resources import files
from importlib.util import find_spec
prompts = files("judge_service.prompts")
print(json.dumps({
    "package": judge_service.__file__,
    "sandbox": sandbox.__file__,
    "prompts": str(prompts),
    "readme": (prompts / "README.md").is_file(),
    "files": {f"{d.name}/{f.name}": hashlib.sha256(f.read_bytes()).hexdigest()
              for d in prompts.iterdir() if d.is_dir() and d.name != "__pycache__"
              for f in d.iterdir()},
    "tools": {m: find_spec(f"judge_service.devtools.{m}") is not None
              for m in ("arith_traces", "credit_runs")},
}))
"""
# The docs' user tools and the maintainers' layer check (stdlib only) stay in the
# package; the test harness is not in the wheel.
DEVTOOLS = {"__init__.py", "arith_traces.py", "credit_runs.py", "imports.py", "layers.py"}


def _run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, **kwargs)
    assert done.returncode == 0, f"{command[:4]} failed:\n{done.stdout}\n{done.stderr}"
    return done


def _build_wheel(tmp_path: Path) -> Path:
    """The wheel of a copy of the package sources (the checkout gets no build/ directory)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    # Without the scanners' sources setup.py compiles nothing: a pure-Python wheel, in seconds.
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "*.pyx", "*.c", "*.so")
    for package in ("judge_service", "sandbox", "prompts"):
        shutil.copytree(ROOT / package, src / package, ignore=junk)
    dist = tmp_path / "dist"
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist)]
    # setuptools >= 70.1 builds wheels by itself: build with this venv's copy, offline and in
    # seconds; an older one needs the isolated build (setuptools and wheel from the index).
    if importlib.util.find_spec("setuptools.command.bdist_wheel") is not None:
        command += ["--no-build-isolation", "--no-index"]
    _run([*command, str(src)])
    (wheel,) = dist.glob("judge_service-*.whl")
    return wheel


def _fresh_venv(tmp_path: Path, wheel: Path) -> Path:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    # With the wheel of its dependency judge-service-client (client/), not on any index.
    client = build_client_wheel(tmp_path)
    _run([*pip, "install", "-q", "--no-deps", "--no-index", str(wheel), str(client)])
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    site = Path(purelib.stdout.strip())
    assert site.is_relative_to(env_dir)
    (site / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env_dir


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without anything that points into the checkout or
    configures the service or the SDKs, plus `extra`."""
    skip = ("JUDGE_", "PYTHON", "OPENAI_", "ANTHROPIC_", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)
    return env


def _expected_version(base_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    judge = build_llm_judge("openai", MODEL, Settings(llm_openai_base_url=base_url))
    try:
        return judge.prompt_version
    finally:
        asyncio.run(judge.aclose())


def _assert_contents(wheel: Path) -> None:
    """The prompts are in the wheel as judge_service/prompts/; the test harness is not."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    prompts = {"__init__.py", "README.md", "v1/instructions.md", "v2/rubric.md"}
    assert {f"judge_service/prompts/{name}" for name in prompts} <= names, sorted(names)
    assert not any(name.startswith(("prompts/", "tests/")) for name in names), sorted(names)
    assert not [name for name in names if "scripted" in name], sorted(names)
    devtools = {n.removeprefix("judge_service/devtools/") for n in names if "/devtools/" in n}
    assert devtools == DEVTOOLS, devtools


def test_installed_wheel_judges_with_its_own_prompts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = _build_wheel(tmp_path)
    _assert_contents(wheel)
    env_dir = _fresh_venv(tmp_path, wheel)
    work = tmp_path / "work"  # the cwd of every command: outside the repository
    work.mkdir()
    assert not work.is_relative_to(ROOT)

    probe = _run([str(env_dir / "bin" / "python"), "-c", PROBE], cwd=work, env=_clean_env())
    found = json.loads(probe.stdout)
    assert Path(found["package"]).is_relative_to(env_dir), found
    assert Path(found["sandbox"]).is_relative_to(env_dir), found
    assert Path(found["prompts"]).is_relative_to(env_dir), found
    assert found["readme"] and all(found["tools"].values()), found
    # Every prompt file of the checkout (prompts/) ships, byte for byte, and nothing else.
    assert DEFAULT_PROMPTS_DIR == ROOT / "prompts"
    checkout = {
        f"{path.parent.name}/{path.name}": hashlib.sha256(path.read_bytes()).hexdigest()
        for path in DEFAULT_PROMPTS_DIR.glob("*/*")
        if path.is_file() and path.parent.name != "__pycache__"
    }
    assert found["files"] == checkout
    assert {"v1/instructions.md", "v2/instructions.md"} <= set(checkout)

    tokenizer = shutil.copytree(ROOT / "examples" / "tokenizer", work / "tokenizer")
    rows = [json.loads(line) for line in (ROOT / "examples" / "rollouts.jsonl").open()]
    rollout = next(r for r in rows if r["id"] == "mul-error-corrected")
    rollout.update(problem="What is 17 × 24? SCRIPT:wheel", tokenizer=str(tokenizer))
    (work / "in.jsonl").write_text(json.dumps(rollout) + "\n", encoding="utf-8")
    loaded = TokenizerCache().get(str(tokenizer))
    trace = loaded.decode(rollout["response_token_ids"])
    wrong = span(trace, "17 × 24 = 418.", "invalid", 0.9)

    with openai_server() as server:
        server.book.add("wheel", submit([wrong]))
        base_url = f"{server.url}/v1"
        env = _clean_env(
            JUDGE_LLM_OPENAI_BASE_URL=base_url,
            JUDGE_ALLOWED_JUDGES="openai:*,rules",
            OPENAI_API_KEY="test-key",
        )
        cli = str(env_dir / "bin" / "judge-service")
        # The pre-flight has tests of its own; here only the judgment counts.
        flags = ["--judge", f"openai:{MODEL}", "--no-progress", "--skip-preflight"]
        _run([cli, "judge", "in.jsonl", "-o", "out.jsonl", *flags], cwd=work, env=env)
        sent = server.requests_for("wheel")

    (result,) = [json.loads(line) for line in (work / "out.jsonl").read_text().splitlines()]
    assert result["status"] == "ok", (result.get("error"), result.get("judge"))
    assert result["judge"]["name"] == f"openai:{MODEL}"
    version = result["judge"]["prompt_version"]
    assert version.startswith("v1.") and version == _expected_version(base_url, monkeypatch)
    assert [(s["start"], s["end"], s["label"]) for s in result["spans"]] == [
        (wrong["start"], wrong["end"], "invalid")
    ]
    # The installed judge sent the installed v1 instructions to the server.
    system = sent[0].body["messages"][0]
    instructions = (DEFAULT_PROMPTS_DIR / "v1" / "instructions.md").read_text(encoding="utf-8")
    assert system["role"] == "system" and instructions.strip() in system["content"]
