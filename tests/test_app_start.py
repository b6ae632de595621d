"""A server starts without the heavy libraries (issue 39): building the app imports neither
the vendor SDKs (loaded when an LLM judge is built) nor transformers and torch (imported
on first use, under one lock, and by a warm-up thread the app starts), nor sympy (the
line reader's, `lazy_sympy.py`: first use, or that warm-up thread), nor the Redis client
when no Redis is configured. Rollouts that arrive while those imports are still going on
wait for them and are judged.

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
HEAVY = ("anthropic", "openai", "redis", "sympy", "torch", "transformers")

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
    out = response.json()
    # (A span ends on a token: with the period or without it, as the tokenizer cut it.)
    spans = out.get("spans", [])
    invalid = sorted(s["evidence"].rstrip(".") for s in spans if s["label"] == "invalid")
    results[index] = [response.status_code, out.get("judge", {}).get("name"), invalid]

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
# Two false claims only sympy's side of the checker reads (a power, a radical): judged
# right though sympy was not loaded when the server started.
SYMPY_TEXT = (
    "<think>\n(17 + 3)^2 = 410.\n\\sqrt{50} = 5\\sqrt{3}.\n17 × 24 = 408.\n</think>\n"
    "So the answer is \\boxed{408}."
)
SYMPY_INVALID = ["(17 + 3)^2 = 410", "\\sqrt{50} = 5\\sqrt{3}"]


def _run(script: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        # A server without Redis (its client must not load), whatever this shell has set.
        env={
            **{k: v for k, v in os.environ.items() if k != "JUDGE_REDIS_URL"},
            "PYTHONPATH": str(ROOT),
        },
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
    # Two loads, eight waiters; the last two need sympy.
    texts = [TEXT] * 6 + [SYMPY_TEXT] * 2
    for n, (directory, text) in enumerate(zip([bpe_dir, metaspace_dir] * 4, texts, strict=True)):
        ids = tokenizer_cache.get(str(directory)).hf.encode(text, add_special_tokens=False)
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
    assert out["results"] == [[200, "rules", []]] * 6 + [[200, "rules", SYMPY_INVALID]] * 2
    # Judging loaded transformers (the tokenizers) and sympy, and still no vendor SDK, nor
    # the Redis client of a server without Redis.
    assert "transformers" in out["after"] and "sympy" in out["after"]
    assert not {"anthropic", "openai", "redis"} & set(out["after"])
    assert out["frozen"]


# Without a server's warm-up, the first claim that needs sympy imports it: the rules
# judge is built, and the line reader, grounding and validation imported, without it.
FIRST_USE = """
import json, sys
import judge_service.validate
from judge_service.config import Settings
from judge_service.judges.registry import build_judge
from judge_service.judges.rules.claims import find_links

build_judge("rules", Settings())
at_build = "sympy" in sys.modules
plain = [link.holds for link in find_links("17 × 24 = 408")]
after_plain = "sympy" in sys.modules
checked = [
    [link.holds for link in find_links(line)]
    for line in ("(17 + 3)^2 = 400", "(17 + 3)^2 = 410", "\\\\sqrt{50} = 5\\\\sqrt{2}", "50% = 1/2")
]
print(json.dumps({"at_build": at_build, "plain": plain, "after_plain": after_plain,
                  "checked": checked, "after": "sympy" in sys.modules}))
"""


def test_sympy_loads_when_a_claim_first_needs_it() -> None:
    out = _run(FIRST_USE)
    assert out["at_build"] is False
    assert out["plain"] == [True] and out["after_plain"] is False  # plain ints: no sympy
    assert out["checked"] == [[True], [False], [True], [True]]
    assert out["after"] is True


# An engine built for the command line has its fallback judge and sympy ready (a rollout
# whose LLM session spent its deadline does not wait for them); a server's leaves both to
# its warm-up thread.
ENGINES = """
import json, sys
from judge_service.config import Settings
from judge_service.pipeline import Engine

server = Engine(Settings(), build_fallback=False)
for_server = [len(server.judges), "sympy" in sys.modules]
cli = Engine(Settings())
print(json.dumps({"server": for_server, "cli": [len(cli.judges), "sympy" in sys.modules]}))
"""


def test_a_cli_engine_has_the_fallback_ready_and_a_servers_leaves_it_to_the_warm_up() -> None:
    assert _run(ENGINES) == {"server": [0, False], "cli": [1, True]}


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


def test_the_lazy_sympy_gives_sympys_own_objects() -> None:
    import sympy

    from judge_service.lazy_sympy import sympy as lazy

    assert lazy.Rational is sympy.Rational and lazy.Integer(7) == sympy.Integer(7)
    assert lazy.core.evalf.PrecisionExhausted is sympy.core.evalf.PrecisionExhausted
    assert "Rational" in vars(lazy)  # kept: later reads cost a plain attribute's
