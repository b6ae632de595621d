"""The LMs behind value / CSCR / CoRT: which a request may name, and the ones kept loaded.

A model spec (hub id, local directory or GGUF path) comes from the caller, and
loading one costs seconds and hundreds of MB, so:

* a spec must match one of ``JUDGE_ALLOWED_SCORER_MODELS`` (fnmatch patterns;
  unset: none), else the request is a 422 naming the option that named it,
  before anything is loaded;
* a spec ``vllm:<model>@<base_url>`` is an OpenAI-compatible server that returns
  prompt log-probabilities (remote.py); only its tokenizer is loaded here;
* a model is loaded once per process (by the first request that needs it, in a
  thread) and kept in an LRU of ``JUDGE_SCORER_CACHE_SIZE``;
* one forward pass at a time per model (a lock): on a CPU two concurrent passes
  only split the cores, and each holds its own activations;
* a scored context (prompt + response, in the model's tokens) is at most
  ``JUDGE_SCORER_MAX_TOKENS`` long (413 naming the rollout's ids beyond it).
"""

from __future__ import annotations

import asyncio
import fnmatch
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from judge_service.config import Settings
from judge_service.errors import InputError, LimitError
from judge_service.trace.decode import Trace
from judge_service.trace.detokenize import LoadedTokenizer

if TYPE_CHECKING:
    from judge_service.methods.remote import RemoteScorer
    from judge_service.probe.alignment import AlignedRollout, Aligner
    from judge_service.probe.scorer import LMScorer


def allowed_model(spec: str, settings: Settings) -> bool:
    return bool(spec) and any(
        fnmatch.fnmatchcase(spec, p) for p in settings.allowed_scorer_models or []
    )


def check_model(spec: str, settings: Settings, field: str) -> None:
    """InputError naming `field` unless the operator allows `spec` as a scorer model."""
    if not allowed_model(spec, settings):
        shown = spec if len(spec) <= 80 else spec[:77] + "..."
        patterns = ", ".join(settings.allowed_scorer_models or []) or "none"
        raise InputError(
            f"model {shown!r} is not allowed on this server; allowed: {patterns} "
            "(JUDGE_ALLOWED_SCORER_MODELS)",
            field=field,
        )


@dataclass
class ScorerModel:
    """A loaded LM with its aligner; `lock` serializes its forward passes."""

    spec: str
    scorer: LMScorer | RemoteScorer
    aligner: Aligner
    lock: threading.Lock = field(default_factory=threading.Lock)
    _same: dict[str, bool] = field(default_factory=dict)

    def same_tokenizer(self, policy: LoadedTokenizer) -> bool:
        """Whether the policy's ids can go to the model as they are (same tokenizer)."""
        if policy.name not in self._same:
            if _resolved(policy.name) == _resolved(self.spec):
                self._same[policy.name] = True
            else:
                vocab = policy.hf.get_vocab()
                self._same[policy.name] = bool(vocab == self.aligner.probe.hf.get_vocab())
        return self._same[policy.name]

    def align(
        self, trace: Trace, policy: LoadedTokenizer | None, prompt_ids: list[int]
    ) -> AlignedRollout:
        """The response after `prompt_ids` in the model's tokens, with each policy boundary
        mapped to a model boundary (probe/alignment.py: the ids as they are for the same
        tokenizer, else the text re-tokenized once)."""
        from judge_service.probe.alignment import AlignedRollout, map_boundaries

        n = len(prompt_ids)
        if policy is not None and self.same_tokenizer(policy):
            ids = [int(i) for i in trace.token_ids]
            bounds = np.arange(trace.num_tokens + 1, dtype=np.int64)
            return AlignedRollout(trace, [*prompt_ids, *ids], n, bounds, mapped=False)
        ids, model_bounds = self.aligner._retokenize(trace.text)
        bounds = map_boundaries(trace.offsets, model_bounds)
        return AlignedRollout(trace, [*prompt_ids, *ids], n, bounds, mapped=True)


def _resolved(name: str) -> str:
    path = Path(name).expanduser()
    return str(path.resolve()) if path.exists() else name


def check_length(length: int, settings: Settings, field: str) -> None:
    if length > settings.scorer_max_tokens:
        raise LimitError(
            f"the scored context is {length} model tokens, over the limit of "
            f"{settings.scorer_max_tokens} (JUDGE_SCORER_MAX_TOKENS)",
            field=field,
        )


class ModelCache:
    """Loaded scorer models of this process, by spec (an LRU)."""

    def __init__(self) -> None:
        self._models: OrderedDict[str, ScorerModel] = OrderedDict()
        self._loading = threading.Lock()

    def get(self, spec: str, settings: Settings, field: str = "options.reweight") -> ScorerModel:
        """The model for `spec`, loading it on first use (blocking: call from a thread); a
        model that cannot be loaded is an InputError naming `field`."""
        with self._loading:
            found = self._models.get(spec)
            if found is None:
                try:
                    found = _load(spec, settings)
                except (OSError, ValueError, ImportError) as exc:
                    raise InputError(
                        f"cannot load model {spec[:80]!r}: {type(exc).__name__}: {str(exc)[:300]}",
                        field=field,
                    ) from exc
                self._models[spec] = found
                while len(self._models) > settings.scorer_cache_size:
                    self._models.popitem(last=False)
            else:
                self._models.move_to_end(spec)
            return found

    async def aget(
        self, spec: str, settings: Settings, field: str = "options.reweight"
    ) -> ScorerModel:
        return await asyncio.to_thread(self.get, spec, settings, field)

    def clear(self) -> None:
        with self._loading:
            self._models.clear()


def _load(spec: str, settings: Settings) -> ScorerModel:
    from judge_service.methods.remote import load_remote, parse_remote_spec
    from judge_service.probe.alignment import Aligner
    from judge_service.probe.loading import load_scorer

    remote = parse_remote_spec(spec)
    if remote is not None:  # vllm:<model>@<url>: the server scores, the tokenizer is here
        served = load_remote(spec)
        return ScorerModel(spec, served, Aligner(served.hf_tokenizer, remote[0]))
    scorer = load_scorer(spec, device=settings.scorer_device)
    return ScorerModel(spec, scorer, Aligner(scorer.hf_tokenizer, spec))


MODELS = ModelCache()  # one per process: every engine and judge shares the loaded models
