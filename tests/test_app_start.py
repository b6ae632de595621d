"""A server starts without the heavy libraries (issue 39): building the app imports neither
the vendor SDKs (loaded when an LLM judge is built) nor transformers and torch (imported
on first use, under one lock, and by a warm-up thread the app starts). Rollouts that
arrive while that import is still going on wait for it and are judged.

Each case runs in a fresh interpreter: this one has imported all of them long ago."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from judge_service.trace import loading
from judge_service.trace.detokenize import LoadedTokenizer
from judge_service.trace.tokenizer import TokenizerCache

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("anthropic", "openai", "torch", "transformers")

# Builds the app, notes which heavy modules are loaded, then serves it over real HTTP and
# sends every rollout at once, as soon as the server answers (the warm-up import of
# transformers is then under way): each must be judged by the rules judge.
SERVE = """
import json, sys, threading
from judge_service.api.app import create_app
from judge_service.config import Settings

heavy, rollouts = json.loads(sys.argv[1]), json.loads(sys.argv[2])
app = create_app(Settings(default_tokenizer=rollouts[0]["tokenizer"]))
at_build = sorted(name for name in heavy if name in sys.modules)

import httpx
from tests.conftest import LiveServer

results = [None] * len(rollouts)

def send(url, index):
    body = {"rollout": rollouts[index], "options": {"use_cache": False}}
    response = httpx.post(url + "/v1/judge", json=body, timeout=60)
    results[index] = [response.status_code, response.json().get("judge", {}).get("name")]

with LiveServer(app) as live:
    threads = [threading.Thread(target=send, args=(live.url, i)) for i in range(len(rollouts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
after = sorted(name for name in heavy if name in sys.modules)
# The warm-up thread froze what the import left alive: transformers' classes are out of
# the collector's way.
import gc
from judge_service.trace import loading
for thread in threading.enumerate():
    if thread.name == "transformers-import":
        thread.join(60)
tracked = {id(o) for o in gc.get_objects()}
frozen = loading._auto_tokenizer is not None and id(loading._auto_tokenizer) not in tracked
print(json.dumps({"at_build": at_build, "results": results, "after": after, "frozen": frozen}))
"""

TEXT = "<think>\n17 × 24 = 408.\n</think>\nSo the answer is \\boxed{408}."


def _run(script: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_app_builds_without_sdks_or_transformers_and_judges_during_the_warm_up(
    bpe_dir: Path, metaspace_dir: Path, tokenizer_cache: TokenizerCache
) -> None:
    rollouts = []
    for n, directory in enumerate([bpe_dir, metaspace_dir] * 3):  # two loads, six waiters
        ids = tokenizer_cache.get(str(directory)).hf.encode(TEXT, add_special_tokens=False)
        rollouts.append(
            {
                "id": f"start-{n}",
                "problem": "What is 17 × 24?",
                "reference_answer": "408",
                "tokenizer": str(directory),
                "response_token_ids": ids,
            }
        )
    out = _run(SERVE, json.dumps(HEAVY), json.dumps(rollouts))
    assert out["at_build"] == []
    assert out["results"] == [[200, "rules"]] * len(rollouts)
    # Judging loaded transformers (the tokenizers), and still no vendor SDK.
    assert "transformers" in out["after"]
    assert "anthropic" not in out["after"] and "openai" not in out["after"]
    assert out["frozen"]


# Building an LLM judge is what loads its vendor SDK, and only its own.
BUILD_LLM = """
import json, sys
from judge_service.config import Settings
from judge_service.judges.registry import build_judge

build_judge("openai:some-model", Settings())
print(json.dumps({"loaded": sorted(n for n in ("anthropic", "openai") if n in sys.modules)}))
"""


def test_an_llm_judge_loads_only_its_own_sdk_when_built() -> None:
    assert _run(BUILD_LLM)["loaded"] == ["openai"]


def test_a_load_waits_for_the_import_of_transformers_before_its_timeout_starts(
    bpe_dir: Path, metaspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import under way (held here, longer than the load timeout) holds every load of
    a fresh cache; none fails with "still loading", and all load once it ends."""
    monkeypatch.setattr(loading, "_auto_tokenizer", None)  # as in a server just started
    cache = TokenizerCache(load_timeout_s=1.0)
    results: dict[str, object] = {}

    def get(name: str) -> None:
        try:
            results[name] = cache.get(name)
        except Exception as exc:
            results[name] = exc

    async def aget(name: str) -> None:
        try:
            results["async " + name] = await cache.aget(name)
        except Exception as exc:
            results["async " + name] = exc

    with loading._TRANSFORMERS_LOCK:
        threads = [threading.Thread(target=get, args=(str(d),)) for d in (bpe_dir, metaspace_dir)]
        threads.append(threading.Thread(target=asyncio.run, args=(aget(str(bpe_dir)),)))
        for thread in threads:
            thread.start()
        time.sleep(2.0)  # twice the load timeout
        assert results == {}  # all still waiting: none gave up
    for thread in threads:
        thread.join(30)
    assert len(results) == 3
    assert all(isinstance(r, LoadedTokenizer) for r in results.values()), results
