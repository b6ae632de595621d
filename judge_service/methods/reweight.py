"""CSCR and CoRT: per-token weights w[t] that multiply the outcome advantage A_i.

``options.reweight`` = ``cscr:<model>`` or ``cort:<model>``; the knobs are
``options.reweight_options`` (weights.py has the map). Both rescore the sampled
response, unchanged, under several prompts in one batched pass (rescoring.py):

* CSCR, as its paper: the *privileged shift* of each token, how much its
  log-prob moves when the prompt asserts the outcome. Three rows: the plain
  prompt (``rollout.problem``, as the policy saw it), the problem followed by an
  assertion that the final answer is correct, and the same saying incorrect.
  shift_c[t] = log p_correct(t) - log p_plain(t), shift_i likewise; the
  sensitivity is s[t] = |shift| of the assertion agreeing with the verdict
  (reward > 0: correct, else incorrect; ``condition: mean``, or a rollout with
  no reward, takes the mean of both |shifts|), and w is decreasing in s (signal
  -s): tokens that only follow from knowing the outcome (the answer, its
  restatements) get less of A_i, the rest more. The old signal, |log p_correct -
  log p_incorrect|, subtracts two privileged rows from each other, so the part of
  the shift both assertions share (knowing that the answer was checked at all)
  cancels; it is what the paper measures. That difference is kept as a diagnostic
  (`diagnostics`: how often the two shifts point opposite ways, their sizes).
* CoRT, in its own setting: the policy was sampled with the rubric's criteria in
  its prompt (``judge-service sample --rubric``), so ``rollout.problem`` is that
  prompt and ``rollout.rubric`` the criteria in it; the criteria-free replay is
  the same template with the criteria block taken out (`sampling.criteria_free`).
  A rollout whose problem does not hold its rubric (criteria attached after
  sampling) is conditioned on ``rubric_prompt(problem, rubric)`` against the
  problem, outside the paper's setting. d[t] = log p_rubric(t) - log p_plain(t);
  w is increasing in d: tokens the criteria make likelier get more.

What is cached is the per-policy-token shifts (CSCR: both rows; CoRT: d), keyed by
the content, the method, the model and the prompt version (`signal_key`); the knobs,
CSCR's condition and its diagnostics are computed per request from them, so a sweep
over them re-pays no forward pass.
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
from judge_service.probe.sampling import criteria_free, rubric_prompt
from judge_service.schemas import ReweightDiagnostics, ReweightOptions, Rollout
from judge_service.store.base import Store
from judge_service.trace.decode import Trace
from judge_service.trace.detokenize import LoadedTokenizer

log = logging.getLogger(__name__)

Method = Literal["cscr", "cort"]
Condition = Literal["verdict", "mean"]
METHODS: tuple[Method, ...] = ("cscr", "cort")
# v2: CSCR caches its two shifts against the plain prompt; CoRT's rubric template.
PROMPT_VERSION = "reweight-v2"

CSCR_CORRECT = "A solution follows. Its final answer has been checked: it is correct."
CSCR_INCORRECT = "A solution follows. Its final answer has been checked: it is incorrect."
# A log-prob shift under this (nats) is rounding, not a direction: sign reversals skip it.
NEGLIGIBLE_SHIFT = 1e-3

# The project's own defaults, not the papers' (their text could not be checked offline;
# docs/auditing.md "Model-internal credit"): a token keeps between half and twice its mean share
# of A_i, a bounded departure from GRPO's uniform credit.
DEFAULTS: dict[Method, ReweightOptions] = {
    "cscr": ReweightOptions(
        temperature=1.0, min_weight=0.5, max_weight=2.0, strength=1.0, condition="verdict"
    ),
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
    condition: Condition = "verdict"

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
    condition: Condition = given.condition or base.condition or "verdict"
    return ReweightSpec(chosen, model, pick("temperature"), low, high, pick("strength"), condition)


def check_rollout(spec: ReweightSpec, rollout: Rollout, field: str) -> None:
    """Before anything is paid: CoRT needs the rollout's rubric."""
    if spec.method == "cort" and not (rollout.rubric or "").strip():
        raise InputError(
            "cort reweighting needs the rollout's rubric (the grading criteria)",
            field=f"{field}.rubric" if field else "rubric",
        )


def prompts(spec: ReweightSpec, rollout: Rollout) -> list[str]:
    """The user messages the response is rescored under: CSCR plain, correct, incorrect;
    CoRT rubric, plain."""
    problem = rollout.problem  # the prompt the policy saw
    if spec.method == "cscr":
        return [problem, f"{problem}\n\n{CSCR_CORRECT}", f"{problem}\n\n{CSCR_INCORRECT}"]
    plain = criteria_free(problem, rollout.rubric)
    if plain is not None:  # sampled with the criteria in the prompt (CoRT's own setting)
        return [problem, plain]
    # The rubric was attached after sampling: condition on it the same way, by the template.
    return [rubric_prompt(problem, rollout.rubric), problem]


def shift_rows(spec: ReweightSpec) -> int:
    """How many per-token rows `compute_shifts` gives (and the cache holds)."""
    return 2 if spec.method == "cscr" else 1


def compute_shifts(
    model: ScorerModel,
    spec: ReweightSpec,
    rollout: Rollout,
    trace: Trace,
    policy: LoadedTokenizer | None,
    settings: Settings,
    field: str,
) -> FloatArray:
    """(rows, T) per policy token: CSCR log p_correct - log p_plain and log p_incorrect -
    log p_plain; CoRT log p_rubric - log p_plain."""
    from judge_service.methods.rescoring import per_policy_token, response_logprobs

    prompt_ids = [model.aligner.prompt_ids(text) for text in prompts(spec, rollout)]
    aligned = model.align(trace, policy, prompt_ids[0])
    response = aligned.context_ids[aligned.prompt_length :]
    longest = max(len(p) for p in prompt_ids) + len(response)
    where = f"{field}.response_token_ids" if field else "response_token_ids"
    check_length(longest, settings, where)
    if not response:
        return np.zeros((shift_rows(spec), trace.num_tokens), np.float64)
    with model.lock:
        logprobs = response_logprobs(model.scorer, prompt_ids, response)
    rows = [per_policy_token(row, aligned.boundaries) for row in logprobs]
    if spec.method == "cscr":
        plain, correct, incorrect = rows
        return np.stack([correct - plain, incorrect - plain]).astype(np.float64)
    return np.asarray([rows[0] - rows[1]], np.float64)


def signal_of(
    spec: ReweightSpec, shifts: FloatArray, reward: float | None, mask: FloatArray | None
) -> tuple[FloatArray, ReweightDiagnostics | None]:
    """The signal (larger: more weight) from cached `shifts`, and CSCR's diagnostics."""
    if spec.method == "cort":
        return np.asarray(shifts[0], np.float64), None
    correct, incorrect = shifts[0], shifts[1]
    used: Literal["correct", "incorrect", "mean"] = "mean"
    if spec.condition == "verdict" and reward is not None:
        used = "correct" if reward > 0 else "incorrect"
    if used == "mean":
        sensitivity = 0.5 * (np.abs(correct) + np.abs(incorrect))
    else:
        sensitivity = np.abs(correct if used == "correct" else incorrect)
    return -sensitivity, diagnostics(spec.condition, used, correct, incorrect, mask)


def diagnostics(
    condition: Condition,
    used: Literal["correct", "incorrect", "mean"],
    correct: FloatArray,
    incorrect: FloatArray,
    mask: FloatArray | None,
) -> ReweightDiagnostics:
    """The correct-vs-incorrect contrast over the masked tokens."""
    keep = np.ones(correct.shape[0], bool) if mask is None else np.asarray(mask) > 0
    c, i = correct[keep], incorrect[keep]
    both = (np.abs(c) > NEGLIGIBLE_SHIFT) & (np.abs(i) > NEGLIGIBLE_SHIFT)
    compared = int(both.sum())
    reversed_ = int((np.sign(c[both]) != np.sign(i[both])).sum())

    def mean(x: FloatArray) -> float:
        return float(np.mean(x)) if x.size else 0.0

    return ReweightDiagnostics(
        condition=condition,
        condition_used=used,
        sign_reversal_share=reversed_ / compared if compared else None,
        compared_tokens=compared,
        mean_abs_shift_correct=mean(np.abs(c)),
        mean_abs_shift_incorrect=mean(np.abs(i)),
        mean_abs_difference=mean(np.abs(c - i)),
    )


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
    shifts = compute_shifts(model, spec, rollout, trace, policy, settings, field)
    mask = None if rollout.response_mask is None else np.asarray(rollout.response_mask, float)
    return signal_of(spec, shifts, rollout.reward, mask)[0]


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
    ) -> tuple[FloatArray, ReweightDiagnostics | None]:
        key = signal_key(spec, rollout, policy.name if policy else "")
        shifts = await self._lookup(tenant, key) if use_cache else None
        if shifts is None or shifts.shape != (shift_rows(spec), trace.num_tokens):
            model = await MODELS.aget(spec.model, self.settings)
            work = functools.partial(
                compute_shifts, model, spec, rollout, trace, policy, self.settings, field
            )
            shifts = await asyncio.to_thread(work)
            if use_cache:
                await self._save(tenant, key, shifts)
        mask = None if rollout.response_mask is None else np.asarray(rollout.response_mask, float)
        signal, found = signal_of(spec, shifts, rollout.reward, mask)
        return bounded_weights(signal, mask, **spec.knobs()), found

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
        flat = np.frombuffer(base64.b64decode(stored["shifts"]), "<f8").astype(np.float64)
        rows = int(stored["rows"])
        return flat.reshape(rows, -1) if rows > 0 and flat.size % rows == 0 else None

    async def _save(self, tenant: str, key: str, shifts: FloatArray) -> None:
        if self.store is None:
            return
        blob = base64.b64encode(np.ascontiguousarray(shifts, "<f8").tobytes()).decode("ascii")
        record = {"shifts": blob, "rows": int(shifts.shape[0])}
        try:
            await self.store.put_judgment(tenant, key, json.dumps(record))
        except StoreUnavailable as exc:
            log.warning("reweight cache unavailable, signal not stored: %s", exc)
