"""A scripted judge that degrades mid-run, for the drift audit's tests and bench.

Two scripts, ``drift-err`` (the trace with a wrong step and its correction) and
``drift-ok`` (a correct trace), both played by one `Degrader` whose `mode` the test
switches while the service runs:

* ``good``: the judge's ordinary behaviour, with noise (seeded): the wrong step
  `invalid`, the correction `verified_correction`, the re-check `valid_progress`, each
  span sometimes left out, and 3% of sessions failing (a 400: the service falls back);
* ``mislabel``: the wrong step labelled `valid_progress` (validation rejects it; the
  re-check stands), the correction left out;
* ``lazy``: submits no spans at all;
* ``half_fail``: every other session fails (a 400), the rest as ``good``.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from judge_service.trace import Trace
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import FakeProviderServer, Fault, Reply, View, submit
from tests.harness.scripted.harness import CORRECTION, TRACE_TEXT, WRONG_STEP, encode, span

RECHECK = "Let me re-check: 17 × 24 = 408. Yes."
OK_TEXT = (
    "<think>\nLet me compute 17 × 24 step by step.\n17 × 24 = 17 × 20 + 17 × 4 = 340 + 68 = 408.\n"
    "Let me re-check: 17 × 24 = 408. Yes.\n</think>\nSo the answer is \\boxed{408}."
)
OK_STEP = "17 × 24 = 17 × 20 + 17 × 4 = 340 + 68 = 408."
MODES = ("good", "mislabel", "lazy", "half_fail")
FAULT = Fault(400, message="scripted: the session fails")


def engine_settings(server: FakeProviderServer, **extra: Any) -> dict[str, Any]:
    """Settings (keyword arguments) of an engine judging with the scripted Anthropic judge."""
    return {
        "llm_anthropic_base_url": server.url,
        "llm_tools": "view_tokens,search_trace",
        "llm_request_timeout_s": 10.0,
        "llm_max_retries": 0,
        "allowed_judges": "anthropic:*,rules",
        **extra,
    }


class Degrader:
    def __init__(self, bpe: LoadedTokenizer, seed: int = 0) -> None:
        self.mode = "good"
        self.sessions = 0
        self._draw = random.Random(seed)
        self._lock = threading.Lock()
        self.err_ids = encode(bpe, TRACE_TEXT)
        self.ok_ids = encode(bpe, OK_TEXT)
        err, ok = bpe.decode(self.err_ids), bpe.decode(self.ok_ids)
        self._err = {
            "invalid": span(err, WRONG_STEP, "invalid"),
            "mislabelled": span(err, WRONG_STEP, "valid_progress"),
            "correction": span(err, CORRECTION, "verified_correction"),
            "recheck": span(err, RECHECK, "valid_progress"),
        }
        self._ok = {
            "step": span(ok, OK_STEP, "valid_progress"),
            "recheck": span(ok, RECHECK, "valid_progress"),
        }
        self.traces: dict[str, Trace] = {"err": err, "ok": ok}

    def install(self, server: FakeProviderServer) -> None:
        server.book.add("drift-err", lambda view: self._turn(view, "err"))
        server.book.add("drift-ok", lambda view: self._turn(view, "ok"))

    def rollout(self, index: int, tokenizer: str) -> dict[str, Any]:
        """The `index`-th rollout of a run: one in three the correct trace."""
        kind = "ok" if index % 3 == 2 else "err"
        return {
            "id": f"r{index}",
            "problem": f"Compute 17 × 24. SCRIPT:drift-{kind} #{index}",
            "response_token_ids": self.ok_ids if kind == "ok" else self.err_ids,
            "tokenizer": tokenizer,
            "reward": 1.0,
            "final_answer": "408",
            "reference_answer": "408",
        }

    def _turn(self, view: View, kind: str) -> Reply | Fault:
        with self._lock:
            self.sessions += 1
            mode, draw, session = self.mode, self._draw.random(), self.sessions
        if mode == "lazy":
            return submit([])
        if mode == "half_fail" and session % 2:
            return FAULT
        if mode in ("good", "half_fail") and draw < 0.03:
            return FAULT
        spans = self._spans(kind, mode)
        return submit(spans)

    def _spans(self, kind: str, mode: str) -> list[dict[str, Any]]:
        keep = [self._draw.random() >= 0.1 for _ in range(3)]
        if kind == "ok":
            chosen = [self._ok["step"], self._ok["recheck"]]
            return [s for s, k in zip(chosen, keep, strict=False) if k] or [self._ok["step"]]
        if mode == "mislabel":
            return [self._err["mislabelled"], self._err["recheck"]]
        chosen = [self._err["invalid"], self._err["correction"], self._err["recheck"]]
        out = [s for s, k in zip(chosen, keep, strict=True) if k]
        # a correction needs the error before it: a judge that drops one drops both
        if self._err["invalid"] not in out:
            out = [s for s in out if s is not self._err["correction"]]
        return out or [self._err["recheck"]]
