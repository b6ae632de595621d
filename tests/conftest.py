"""Shared fixtures: tokenizers built locally and loaded through `transformers` from a directory."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge_service.trace.tokenizer import LoadedTokenizer, TokenizerCache
from tests.harness.tokenizers import build_byte_level_bpe, build_metaspace_bpe

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="session")
def bpe_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level BPE tokenizer directory (GPT-2 / Qwen / Llama 3 style)."""
    return build_byte_level_bpe(tmp_path_factory.mktemp("tok") / "bpe")


@pytest.fixture(scope="session")
def metaspace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SentencePiece-style tokenizer directory (Metaspace with byte fallback)."""
    return build_metaspace_bpe(tmp_path_factory.mktemp("tok") / "sp")


@pytest.fixture(scope="session", autouse=True)
def tokenizer_roots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Servers built in tests load the tokenizers the tests build (under pytest's temp
    directory) and the examples'; a test of the allow-list sets its own roots."""
    patch = pytest.MonkeyPatch()
    patch.setenv("JUDGE_TOKENIZER_ROOTS", f"{tmp_path_factory.getbasetemp()},{EXAMPLES}")
    yield
    patch.undo()


@pytest.fixture(scope="session")
def tokenizer_cache() -> TokenizerCache:
    return TokenizerCache()


@pytest.fixture(scope="session")
def bpe(bpe_dir: Path, tokenizer_cache: TokenizerCache) -> LoadedTokenizer:
    return tokenizer_cache.get(str(bpe_dir))


class LiveServer:
    """A real uvicorn server on a free loopback port, running in a thread."""

    def __init__(self, app: object) -> None:
        import socket

        import uvicorn

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")  # type: ignore[arg-type]
        self.server = uvicorn.Server(config)
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        import threading
        import time

        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="session")
def example_rollouts() -> list[dict[str, object]]:
    import json

    with (EXAMPLES / "rollouts.jsonl").open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    for row in rows:
        row["tokenizer"] = str(EXAMPLES / "tokenizer")
    return rows


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Any]]:
    """Scripted Anthropic and OpenAI servers on loopback, one pair per test module."""
    from tests.harness.scripted import anthropic_server, openai_server

    with anthropic_server() as anthropic, openai_server() as openai:
        yield {"anthropic": anthropic, "openai": openai}


@pytest.fixture(scope="module")
def equivalence_checker() -> Iterator[Any]:
    """The equivalence checker with its real zygote pool (two workers), one per module."""
    from judge_service.equivalence import EquivalenceChecker

    with EquivalenceChecker(pool_size=2, timeout_s=5.0) as checker:
        checker.start()
        yield checker


@pytest.fixture
def provider_keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """API keys for the real SDKs (they talk to the scripted servers), and fresh limiters."""
    from judge_service.judges.llm.ratelimit import reset_shared_limiters

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    reset_shared_limiters()
    yield
    reset_shared_limiters()


# The trainer integrations' tests skip where the `trainers` extra (or verl) is missing;
# .ci/run installs them and sets JUDGE_REQUIRE_TRAINERS=1, which makes a missing one an
# error before any test runs instead of a silent skip.
TRAINER_MODULES = ("torch", "trl", "verl.trainer.ppo.core_algos")


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("JUDGE_REQUIRE_TRAINERS") == "1":
        for name in TRAINER_MODULES:
            importlib.import_module(name)
