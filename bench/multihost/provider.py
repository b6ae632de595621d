"""The latency-bound case: an LLM judge. The rules judge costs CPU alone, and every host
here shares this machine's two CPUs, so with it a second host adds no throughput. A real
judge is bound by its provider's latency and each worker's concurrency instead; this is
that judge: the scripted Anthropic server (tests/harness/scripted, real SDK, real HTTP)
in the driver's namespace, answering each call after `DELAY_S`, reached by the workers
over the bridge."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bench.multihost.procs import ROOT
from judge_service.trace.tokenizer import LoadedTokenizer, TokenizerCache
from tests.harness.scripted import FakeProviderServer, anthropic_server
from tests.harness.scripted.jobs import MODEL, add_sessions, sessions, worker_settings

DELAY_S = 0.2  # each provider call; a session is two calls (view, then submit)
WORKER_CONCURRENCY = 8  # sessions in flight per worker: the bound of this case
TOKENIZER = "examples/tokenizer"  # relative to the checkout: the servers' cwd
OPTIONS: dict[str, Any] = {"judge": MODEL, "deadline_s": 120, "use_cache": False}
SPANS_PER_ROLLOUT = 2  # add_sessions' script submits two valid spans


@dataclass
class Provider:
    server: FakeProviderServer
    bpe: LoadedTokenizer

    def env(self) -> dict[str, str]:
        """The API's and the workers' settings for this judge (and the worker concurrency
        that bounds it)."""
        settings = worker_settings(self.server, worker_concurrency=WORKER_CONCURRENCY)
        env = {f"JUDGE_{k.upper()}": str(v) for k, v in settings.items()}
        env["ANTHROPIC_API_KEY"] = "bench-key"  # the scripted server takes any key
        return env

    def rollouts(self, tag: str, count: int) -> list[dict[str, Any]]:
        """`count` rollouts, each with its own scripted session."""
        keys = [f"{tag}-{i:04d}" for i in range(count)]
        return add_sessions(self.server, self.bpe, ROOT / TOKENIZER, keys)

    def sessions_paid(self, ids: list[str]) -> dict[str, int]:
        """Judge sessions opened for these rollouts: the total and how many were paid twice."""
        paid = sessions(self.server)
        counts = Counter({i: paid.get(i, 0) for i in ids})
        return {
            "sessions": sum(counts.values()),
            "repaid": sum(max(0, n - 1) for n in counts.values()),
            "unpaid": sum(1 for n in counts.values() if n == 0),
        }


@contextmanager
def provider(address: str) -> Iterator[Provider]:
    """The scripted provider listening on `address` (the bridge's, in this namespace)."""
    bpe = TokenizerCache().get(str(ROOT / TOKENIZER))
    server = anthropic_server(delay_s=DELAY_S, host=address)
    with server:
        yield Provider(server, bpe)


def check_llm_results(job: str, got: list[dict[str, Any]]) -> list[str]:
    """Problems with an LLM job's results beyond one each in order: every one judged by
    the scripted judge (not a fallback), its two spans accepted."""
    bad = [
        r["id"]
        for r in got
        if r.get("status") != "ok" or len(r.get("spans", [])) != SPANS_PER_ROLLOUT
    ]
    return [f"{job}: {len(bad)} results not judged as scripted: {bad[:3]}"] if bad else []
