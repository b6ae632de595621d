"""Putting a rollout in front of the probe LM: the prompt, the response tokens, and where cuts fall.

Cuts are policy-token boundaries: a span ``[start, end)`` of the judge is probed
at boundaries `start` and `end` of the rollout's own ``response_token_ids``.

* Same tokenizer (same name or directory, or an identical vocabulary): the
  rollout's ids go to the LM as they are. They are never re-tokenized: sampled
  ids are often not the canonical tokenization of their text, and a cut must
  fall exactly where the judge's span starts or ends.
* A different tokenizer (say the policy's BPE and the probe's SmolLM2): the ids
  are decoded once with the policy's tokenizer into a `Trace`, its text is
  tokenized once with the probe's tokenizer, and each cut (a char offset
  ``trace.offsets[t]``) maps to the last probe-token boundary at or before it.
  Where several boundaries share that offset (byte tokens of one split
  character) the earliest is taken, so a prefix never carries part of the
  next character. The probed prefix can therefore end a few characters before
  the policy cut, never after it.

The prompt is the problem in the probe's chat template when it has one (as the
policy saw it), else the problem and a blank line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from judge_service.trace.decode import Trace
from judge_service.trace.tokenizer import LoadedTokenizer, TokenizerCache


@dataclass(frozen=True)
class AlignedRollout:
    trace: Trace  # the response, decoded with the policy's tokenizer
    context_ids: list[int]  # prompt + response, in probe tokens
    prompt_length: int
    boundaries: npt.NDArray[np.int64]  # policy boundary t (0..T) -> probe response tokens before it
    mapped: bool  # True when the text was re-tokenized for a different probe tokenizer

    def context_cut(self, cut: int) -> int:
        """The cut, as a length of `context_ids`."""
        return self.prompt_length + int(self.boundaries[cut])


def _resolved(name: str) -> str:
    path = Path(name).expanduser()
    return str(path.resolve()) if path.exists() else name


class Aligner:
    """Aligns rollouts to one probe tokenizer; policy tokenizers are loaded once each."""

    def __init__(self, probe_hf: Any, probe_name: str, cache: TokenizerCache | None = None) -> None:
        self.probe = LoadedTokenizer(probe_name, probe_hf)
        self.probe_name = probe_name
        self._cache = cache or TokenizerCache()
        self._policy: dict[str, LoadedTokenizer] = {}
        self._same: dict[str, bool] = {}

    def policy_tokenizer(self, name: str) -> LoadedTokenizer:
        """A hub id or directory (as the judge loads it), or a GGUF file (the probe's own kind)."""
        if name not in self._policy:
            from judge_service.probe.loading import is_gguf, load_hf_tokenizer

            if is_gguf(name):
                self._policy[name] = LoadedTokenizer(name, load_hf_tokenizer(name))
            else:
                self._policy[name] = self._cache.get(name)
        return self._policy[name]

    def is_same(self, name: str) -> bool:
        if name not in self._same:
            if _resolved(name) == _resolved(self.probe_name):
                self._same[name] = True
            else:
                policy = self.policy_tokenizer(name).hf
                self._same[name] = bool(policy.get_vocab() == self.probe.hf.get_vocab())
        return self._same[name]

    def prompt_ids(self, problem: str) -> list[int]:
        hf = self.probe.hf
        if getattr(hf, "chat_template", None):
            text = hf.apply_chat_template(
                [{"role": "user", "content": problem}], add_generation_prompt=True, tokenize=False
            )
            ids = list(hf(text, add_special_tokens=False)["input_ids"])
        else:
            ids = list(hf(f"{problem}\n\n" if problem else "")["input_ids"])
        if not ids:
            # A cut needs a token before it: its logit predicts the forced ending.
            start = hf.bos_token_id if hf.bos_token_id is not None else hf.eos_token_id
            ids = [int(start if start is not None else 0)]
        return [int(i) for i in ids]

    def align(self, rollout: dict[str, Any], tokenizer: str | None = None) -> AlignedRollout:
        name = tokenizer or rollout.get("tokenizer") or self.probe_name
        policy = self.policy_tokenizer(name)
        trace = policy.decode(rollout["response_token_ids"])
        prompt = self.prompt_ids(str(rollout.get("problem") or ""))
        if self.is_same(name):
            ids = [int(i) for i in trace.token_ids]
            bounds = np.arange(trace.num_tokens + 1, dtype=np.int64)
            return AlignedRollout(trace, prompt + ids, len(prompt), bounds, mapped=False)
        probe_ids, probe_bounds = self._retokenize(trace.text)
        bounds = map_boundaries(trace.offsets, probe_bounds)
        return AlignedRollout(trace, prompt + probe_ids, len(prompt), bounds, mapped=True)

    def _retokenize(self, text: str) -> tuple[list[int], npt.NDArray[np.int64]]:
        """The text in probe tokens, once, and the char offset of every probe boundary."""
        encoded = self.probe.hf(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = [int(i) for i in encoded["input_ids"]]
        decoded = self.probe.decode(ids, field="text")
        if decoded.text == text:
            return ids, decoded.offsets
        # The probe's decoder does not give the text back (normalizers, Metaspace):
        # fall back to the tokenizer's own offsets, made monotone.
        ends = np.array([b for _, b in encoded["offset_mapping"]], dtype=np.int64)
        bounds = np.concatenate([[0], np.maximum.accumulate(ends)]) if ends.size else np.zeros(1)
        return ids, bounds.astype(np.int64)


def map_boundaries(
    policy_offsets: npt.NDArray[np.int64], probe_offsets: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """For each policy boundary (a char offset) the earliest probe boundary of the last
    probe offset at or before it."""
    last = np.searchsorted(probe_offsets, policy_offsets, side="right") - 1
    last = np.clip(last, 0, None)
    return np.searchsorted(probe_offsets, probe_offsets[last], side="left").astype(np.int64)
