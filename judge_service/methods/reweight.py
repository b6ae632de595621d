"""CSCR and CoRT: per-token weights w[t] that multiply the outcome advantage A_i.

``options.reweight`` = ``cscr:<model>`` or ``cort:<model>``; the knobs are
``options.reweight_options`` (weights.py has the map). Both rescore the sampled
response, unchanged, under two prompts (rescoring.py: one batched pass):

* CSCR: the problem followed by an assertion that the solution's final answer is
  correct, and the same assertion saying incorrect. s[t] = |log p_correct(t) -
  log p_incorrect(t)| is how much token t's likelihood depends on the verdict;
  w is decreasing in s (signal -s): tokens that merely track the verdict (the
  answer, its restatements) get less of A_i, the rest more.
* CoRT: the problem with the rollout's rubric (``rollout.rubric``) as grading
  criteria, and the same problem without it. d[t] = log p_rubric(t) - log
  p_plain(t); w is increasing in d: tokens the criteria make likelier get more.

What is cached is the signal (s or d per token), keyed by the content, the method,
the model and the prompt version (`signal_key`); the knobs are applied per request,
so a sweep over them re-pays no forward pass.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Literal

import numpy as np

from judge_service.config import Settings
from judge_service.errors import InputError, StoreUnavailable
from judge_service.methods.models import MODELS, ScorerModel, check_length, check_model
from judge_service.methods.weights import FloatArray, bounded_weights
from judge_service.schemas import ReweightOptions, Rollout
from judge_service.store.base import Store
from judge_service.trace.decode import Trace
from judge_service.trace.detokenize import LoadedTokenizer

log = logging.getLogger(__name__)

Method = Literal["cscr", "cort"]
METHODS: tuple[Method, ...] = ("cscr", "cort")
PROMPT_VERSION = "reweight-v1"

CSCR_CORRECT = "A solution follows. Its final answer has been checked: it is correct."
CSCR_INCORRECT = "A solution follows. Its final answer has been checked: it is incorrect."
CORT_CRITERIA = "The solution will be graded against these criteria:\n"

# Our defaults (the seed papers' exact values are not restated here): a token keeps
# between half and twice the mean share of A_i.
DEFAULTS: dict[Method, ReweightOptions] = {
    "cscr": ReweightOptions(temperature=1.0, min_weight=0.5, max_weight=2.0, strength=1.0),
    "cort": ReweightOptions(temperature=1.0, min_weight=0.5, max_weight=2.0, strength=1.0),
}


@dataclass(frozen=True)
class ReweightSpec:
    method: Method
    model: str
    temperature: float
    min_weight: float
    max_weight: float
    strength: float

    def knobs(self) -> dict[str, float]:
        return {
            "temperature": self.temperature,
            "min_weight": self.min_weight,
            "max_weight": self.max_weight,
            "strength": self.strength,
        }


def parse_spec(
    spec: str, options: ReweightOptions | None, settings: Settings, field: str = "options.reweight"
) -> ReweightSpec:
    """``cscr:<model>`` / ``cort:<model>`` with its knobs; InputError naming `field` for an
    unknown method or a model the server does not allow."""
    method, _, model = spec.partition(":")
    if method not in METHODS or not model:
        raise InputError(
            f"unknown reweight {spec[:80]!r}; use cscr:<model> or cort:<model>", field=field
        )
    check_model(model, settings, field)
    chosen: Method = "cscr" if method == "cscr" else "cort"
    base = DEFAULTS[chosen]
    given = options or ReweightOptions()

    def pick(name: str) -> float:
        value = getattr(given, name)
        return float(getattr(base, name) if value is None else value)

    low, high = pick("min_weight"), pick("max_weight")
    if low > 1.0 or high < 1.0:  # the schema bounds each; mean 1 needs low <= 1 <= high
        raise InputError("need min_weight <= 1 <= max_weight", field="options.reweight_options")
    return ReweightSpec(chosen, model, pick("temperature"), low, high, pick("strength"))


def check_rollout(spec: ReweightSpec, rollout: Rollout, field: str) -> None:
    """Before anything is paid: CoRT needs the rollout's rubric."""
    if spec.method == "cort" and not (rollout.rubric or "").strip():
        raise InputError(
            "cort reweighting needs the rollout's rubric (the grading criteria)",
            field=f"{field}.rubric" if field else "rubric",
        )


def prompts(spec: ReweightSpec, rollout: Rollout) -> list[str]:
    """The two user messages the response is rescored under (signal = first vs second)."""
    problem = rollout.problem
    if spec.method == "cscr":
        return [f"{problem}\n\n{CSCR_CORRECT}", f"{problem}\n\n{CSCR_INCORRECT}"]
    return [f"{problem}\n\n{CORT_CRITERIA}{rollout.rubric or ''}", problem]


def compute_signal(
    model: ScorerModel,
    spec: ReweightSpec,
    rollout: Rollout,
    trace: Trace,
    policy: LoadedTokenizer | None,
    settings: Settings,
    field: str,
) -> FloatArray:
    """The per-policy-token signal (larger: more weight) of `spec` for one response."""
    from judge_service.methods.rescoring import per_policy_token, response_logprobs

    prompt_ids = [model.aligner.prompt_ids(text) for text in prompts(spec, rollout)]
    aligned = model.align(trace, policy, prompt_ids[0])
    response = aligned.context_ids[aligned.prompt_length :]
    longest = max(len(p) for p in prompt_ids) + len(response)
    where = f"{field}.response_token_ids" if field else "response_token_ids"
    check_length(longest, settings, where)
    if not response:
        return np.zeros(trace.num_tokens, np.float64)
    with model.lock:
        logprobs = response_logprobs(model.scorer, prompt_ids, response)
    first, second = (per_policy_token(row, aligned.boundaries) for row in logprobs)
    if spec.method == "cscr":
        return np.asarray(-np.abs(first - second), np.float64)
    return np.asarray(first - second, np.float64)


def signal_key(spec: ReweightSpec, rollout: Rollout, tokenizer: str) -> str:
    """The content address of a signal; the knobs are not in it (applied per request)."""
    ids = np.asarray(rollout.response_token_ids, np.int64).tobytes()
    material = {
        "ids": hashlib.sha256(ids).hexdigest(),
        "tokenizer": tokenizer,
        "problem": rollout.problem,
        "rubric": rollout.rubric if spec.method == "cort" else None,
        "method": spec.method,
        "model": spec.model,
        "prompt_version": PROMPT_VERSION,
    }
    blob = json.dumps(material, sort_keys=True, separators=(",", ":")).encode()
    # Longer than a judgment key's 80 characters: GET /v1/judgments/{key} never serves it.
    return "reweight-signal:sha256:" + hashlib.sha256(blob).hexdigest()


class Reweighter:
    """Weights for the pipeline: the signal from the store or the model, the map per request."""

    def __init__(self, settings: Settings, store: Store | None) -> None:
        self.settings = settings
        self.store = store

    async def weights(
        self,
        spec: ReweightSpec,
        rollout: Rollout,
        trace: Trace,
        policy: LoadedTokenizer | None,
        *,
        tenant: str,
        use_cache: bool,
        field: str,
    ) -> FloatArray:
        key = signal_key(spec, rollout, policy.name if policy else "")
        signal = await self._lookup(tenant, key) if use_cache else None
        if signal is None or signal.shape != (trace.num_tokens,):
            model = await MODELS.aget(spec.model, self.settings)
            work = functools.partial(
                compute_signal, model, spec, rollout, trace, policy, self.settings, field
            )
            signal = await asyncio.to_thread(work)
            if use_cache:
                await self._save(tenant, key, signal)
        mask = None if rollout.response_mask is None else np.asarray(rollout.response_mask)
        return bounded_weights(signal, mask, **spec.knobs())

    async def _lookup(self, tenant: str, key: str) -> FloatArray | None:
        if self.store is None:
            return None
        try:
            data = await self.store.get_judgment(tenant, key)
        except StoreUnavailable as exc:
            log.warning("reweight cache unavailable, scoring without it: %s", exc)
            return None
        if data is None:
            return None
        stored = json.loads(data)
        return np.frombuffer(base64.b64decode(stored["signal"]), "<f8").astype(np.float64)

    async def _save(self, tenant: str, key: str, signal: FloatArray) -> None:
        if self.store is None:
            return
        blob = base64.b64encode(signal.astype("<f8").tobytes()).decode("ascii")
        try:
            await self.store.put_judgment(tenant, key, json.dumps({"signal": blob}))
        except StoreUnavailable as exc:
            log.warning("reweight cache unavailable, signal not stored: %s", exc)
