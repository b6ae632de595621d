"""The LM scorer: log-probability of answers forced at many cut points of one context.

Cost. Scoring K cuts of a T-token context naively is K full passes (about K·T/2
tokens). Here one `DynamicCache` is extended chunk by chunk up to each cut in
turn; at a cut the suffixes (forced ending + answer, one row per answer) run as
one batch on top of the cache (their common ending once, see `suffix_plan`),
and `crop` takes them off again, so the whole trace costs about T + K·B·|suffix|
forward tokens.

transformers 5.x details this relies on (checked against 5.24):

* a forward pass mutates the cache it is given (`DynamicLayer.update` concatenates);
* ``DynamicCache.crop(-n)`` removes the last n positions; a positive value raises;
* the old ``cache_position`` argument is gone: positions are passed explicitly as
  ``position_ids``, and the causal mask is built from them and the cache length;
* the cache argument is ``cache`` (``past_key_values`` is its deprecated alias);
* logits are shifted by one: ``logits[j]`` predicts token ``j + 1``, so the first
  suffix token is predicted by the last logit of the context, kept from the pass
  that ended at the cut.

Sliding-window and static caches cannot be cropped back; models that use them
are refused here (use `score_naive`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from judge_service.probe.endings import EncodedSuffix
from judge_service.probe.suffix_plan import SuffixGroup, TokenSource, plan_groups, token_sources


@dataclass(frozen=True)
class CutScores:
    """Per cut (rows, in the order asked) and per suffix (columns)."""

    cuts: tuple[int, ...]
    logprob_sum: npt.NDArray[np.float64]  # (K, B): sum of the answer tokens' log-probs
    num_answer_tokens: npt.NDArray[np.int64]  # (B,)

    @property
    def mean_logprob(self) -> npt.NDArray[np.float64]:
        """The probe value: mean log-probability per answer token."""
        return self.logprob_sum / self.num_answer_tokens[None, :]

    @property
    def probability(self) -> npt.NDArray[np.float64]:
        """Probability of the whole answer (its tokens in sequence)."""
        return np.exp(self.logprob_sum)


def _answer_logprob(
    suffix: EncodedSuffix,
    logprobs: torch.Tensor,
    first_logprobs: torch.Tensor,
) -> float:
    """Sum of the answer tokens' log-probs over a full pass: ``logprobs[j - 1]`` predicts
    suffix token j, and the context's last logits predict token 0."""
    total = 0.0
    for j in range(suffix.answer_start, suffix.answer_end):
        row = first_logprobs if j == 0 else logprobs[j - 1]
        total += float(row[suffix.ids[j]])
    return total


class LMScorer:
    """A frozen causal LM and its tokenizer, scoring answers at cut points."""

    def __init__(self, model: Any, hf_tokenizer: Any, *, name: str = "model") -> None:
        self.model = model.eval()
        self.hf_tokenizer = hf_tokenizer
        self.name = name
        self.device: torch.device = next(model.parameters()).device
        self.forward_tokens = 0  # tokens fed through the model, for the benchmark
        self._cache_kwarg = _cache_keyword(model)

    @property
    def model_type(self) -> str | None:
        value = getattr(self.model.config, "model_type", None)
        return str(value) if value is not None else None

    def _forward(
        self, ids: torch.Tensor, start: int, cache: Any, keep: int | torch.Tensor = 0
    ) -> torch.Tensor:
        batch, length = ids.shape
        positions = torch.arange(start, start + length, device=self.device).expand(batch, length)
        self.forward_tokens += batch * length
        out = self.model(
            input_ids=ids,
            position_ids=positions,
            use_cache=cache is not None,
            logits_to_keep=keep,
            **{self._cache_kwarg: cache},
        )
        logits: torch.Tensor = out.logits
        return logits

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        if any(getattr(layer, "is_sliding", False) for layer in cache.layers):
            raise ValueError(
                f"{self.name} uses sliding-window attention, whose cache cannot be cropped back; "
                "use score_naive"
            )
        return cache

    @torch.inference_mode()
    def score_cuts(
        self,
        context_ids: Sequence[int],
        cuts: Sequence[int],
        suffixes: Sequence[EncodedSuffix],
        *,
        chunk_size: int = 1024,
    ) -> CutScores:
        """Score every suffix after ``context_ids[:cut]`` for every cut, with one running cache."""
        _check_cuts(context_ids, cuts)
        groups = plan_groups(suffixes)
        sources = {
            m: token_sources(suffixes[m], group, b)
            for group in groups
            for b, m in enumerate(group.members)
        }
        ids = torch.tensor(list(context_ids), dtype=torch.long, device=self.device)
        cache = self._new_cache()
        by_cut: dict[int, list[float]] = {}
        position = 0
        last_logits: torch.Tensor | None = None
        for cut in sorted(set(cuts)):
            # Extend the running cache to the cut, a chunk at a time so that the
            # activations of a 32k-token trace never sit in memory at once.
            while position < cut:
                step = min(chunk_size, cut - position)
                logits = self._forward(ids[None, position : position + step], position, cache, 1)
                last_logits = logits[0, -1]
                position += step
            assert last_logits is not None
            first = torch.log_softmax(last_logits.float(), dim=-1)
            row = [0.0] * len(suffixes)
            for group in groups:
                shared, rest = self._score_group(cache, position, group)
                read = {"first": first[None], "shared": shared, "rest": rest}
                for m in group.members:
                    row[m] = sum(float(_pick(read[src.where], src)) for src in sources[m])
            by_cut[cut] = row
        rows = [by_cut[c] for c in cuts]
        return _cut_scores(cuts, rows, suffixes)

    def _score_group(
        self, cache: Any, position: int, group: SuffixGroup
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs at the kept positions of the group's shared part (P, V) and rest (B, R, V);
        the cache is back at `position` afterwards."""
        shared = torch.empty(0)
        if group.shared:
            ids = torch.tensor([group.shared], dtype=torch.long, device=self.device)
            keep = torch.tensor(group.shared_keep or [0], dtype=torch.long, device=self.device)
            shared = torch.log_softmax(self._forward(ids, position, cache, keep)[0].float(), -1)
        start = position + len(group.shared)
        rows = len(group.members)
        saved: list[tuple[torch.Tensor, torch.Tensor]] = []
        if rows > 1:
            # The cache holds one row; each suffix row gets a view of it. The pass's
            # concatenation materializes B rows of the prefix (B times the cache, briefly).
            for layer in cache.layers:
                saved.append((layer.keys, layer.values))
                layer.keys = layer.keys.expand(rows, -1, -1, -1)
                layer.values = layer.values.expand(rows, -1, -1, -1)
        ids = torch.tensor(group.padded_rest(), dtype=torch.long, device=self.device)
        keep = torch.tensor(group.rest_keep or [0], dtype=torch.long, device=self.device)
        rest = torch.log_softmax(self._forward(ids, start, cache, keep).float(), -1)
        cache.crop(-group.rest_length)
        # After the crop every row equals the prefix again; put the one-row tensors
        # back so the B-row copy the pass made is freed now, not at the next chunk.
        for layer, (keys, values) in zip(cache.layers, saved, strict=False):
            layer.keys, layer.values = keys, values
        if group.shared:
            cache.crop(-len(group.shared))
        return shared, rest

    @torch.inference_mode()
    def score_naive(
        self, context_ids: Sequence[int], cuts: Sequence[int], suffixes: Sequence[EncodedSuffix]
    ) -> CutScores:
        """The reference: one full pass over prefix + suffix per cut and answer, no cache."""
        _check_cuts(context_ids, cuts)
        rows: list[list[float]] = []
        for cut in cuts:
            row: list[float] = []
            for suffix in suffixes:
                full = torch.tensor(
                    [*context_ids[:cut], *suffix.ids[: suffix.answer_end]],
                    dtype=torch.long,
                    device=self.device,
                )
                logits = self._forward(full[None], 0, None)[0]
                logprobs = torch.log_softmax(logits.float(), dim=-1)
                row.append(_answer_logprob(suffix, logprobs[cut:], logprobs[cut - 1]))
            rows.append(row)
        return _cut_scores(cuts, rows, suffixes)


def _cache_keyword(model: Any) -> str:
    """``cache`` in recent transformers 5.x, ``past_key_values`` before (now a deprecated alias)."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _pick(logprobs: torch.Tensor, source: TokenSource) -> torch.Tensor:
    if source.where == "rest":
        return logprobs[source.batch, source.row, source.token]
    return logprobs[source.row, source.token]


def _check_cuts(context_ids: Sequence[int], cuts: Sequence[int]) -> None:
    if not cuts:
        raise ValueError("no cuts")
    bad = [c for c in cuts if not 1 <= c <= len(context_ids)]
    if bad:
        # A cut needs at least one context token: its last logit predicts the suffix.
        raise ValueError(f"cuts {bad[:3]} outside 1..{len(context_ids)}")


def _cut_scores(
    cuts: Sequence[int], rows: list[list[float]], suffixes: Sequence[EncodedSuffix]
) -> CutScores:
    return CutScores(
        tuple(int(c) for c in cuts),
        np.asarray(rows, dtype=np.float64).reshape(len(cuts), len(suffixes)),
        np.asarray([s.num_answer_tokens for s in suffixes], dtype=np.int64),
    )
