"""A second scorer backend: an OpenAI-compatible server that returns prompt log-probabilities.

So the service can rescore with the policy the trainer is sampling from, where that
policy is served (vLLM), instead of loading a copy of it here. The model spec is

    vllm:<model>@<base_url>          e.g. vllm:Qwen/Qwen3-8B@http://gpu-1:8000/v1

``<model>`` is the name the server serves (``--served-model-name``) and must also be
loadable here as a tokenizer (a hub id in the local cache, a directory or a GGUF
file): the prompts, forced endings and cut points are built in its tokens, as for
the local backend. The spec is matched against ``JUDGE_ALLOWED_SCORER_MODELS`` like
any other (so an operator allows a URL, never a caller).

Wire format (vLLM's ``/v1/completions``; checked against vllm-project/vllm's
``CompletionRequest`` / ``CompletionResponseChoice``): the request sends token ids
as the prompt, a batch as a list of id lists, with ``prompt_logprobs: 0`` (the
prompt token's own log-prob, no alternatives) and ``max_tokens: 1`` (vLLM samples
at least one token)::

    {"model": M, "prompt": [[id, ...], ...], "max_tokens": 1, "temperature": 0,
     "prompt_logprobs": 0}

and each choice (``index`` = the prompt's position) carries
``prompt_logprobs``: one entry per prompt token, ``null`` for the first, else a map
from token id (a JSON string) to ``{"logprob", "rank", "decoded_token"}`` that
holds at least the prompt token itself.

Cost: no KV cache is shared across requests from here; every cut or prompt is a
full prompt on the server, whose prefix cache (``--enable-prefix-caching``) makes
the shared prefixes cheap. `forward_tokens` counts the prompt tokens sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from judge_service.errors import RemoteScorerError
from judge_service.probe.endings import EncodedSuffix
from judge_service.probe.scorer import CutScores, _check_cuts, _cut_scores

PREFIX = "vllm:"


def parse_remote_spec(spec: str) -> tuple[str, str] | None:
    """(model, base_url) of a ``vllm:<model>@<base_url>`` spec; None for a local spec."""
    if not spec.startswith(PREFIX):
        return None
    model, sep, url = spec[len(PREFIX) :].rpartition("@")
    if not sep or not model or not url.startswith(("http://", "https://")):
        raise ValueError(f"a remote scorer spec is vllm:<model>@<http(s) base url>, not {spec!r}")
    return model, url.rstrip("/")


class RemoteScorer:
    """The `LMScorer` interface the methods use, over HTTP."""

    def __init__(
        self,
        model: str,
        base_url: str,
        hf_tokenizer: Any,
        *,
        name: str | None = None,
        timeout_s: float = 120.0,
        batch: int = 64,
        api_key: str | None = None,
    ) -> None:
        import httpx

        self.model = model
        self.base_url = base_url
        self.hf_tokenizer = hf_tokenizer
        self.name = name or f"{PREFIX}{model}@{base_url}"
        self.batch = batch
        self.forward_tokens = 0
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=base_url, timeout=timeout_s, headers=headers)

    @property
    def model_type(self) -> str | None:
        return None  # the ending family is read from the tokenizer

    def close(self) -> None:
        self._client.close()

    def prompt_logprobs(self, prompts: Sequence[Sequence[int]]) -> list[list[float]]:
        """Per prompt, log p(prompt[j] | prompt[:j]) for j >= 1 (j - 1 in the list)."""
        out: list[list[float]] = []
        for at in range(0, len(prompts), self.batch):
            out.extend(self._request([list(p) for p in prompts[at : at + self.batch]]))
        return out

    def _request(self, prompts: list[list[int]]) -> list[list[float]]:
        import httpx

        body = {
            "model": self.model,
            "prompt": prompts,
            "max_tokens": 1,
            "temperature": 0,
            "prompt_logprobs": 0,
        }
        self.forward_tokens += sum(len(p) for p in prompts)
        try:
            response = self._client.post("/completions", json=body)
        except httpx.HTTPError as exc:
            raise RemoteScorerError(f"{self.base_url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise RemoteScorerError(
                f"{self.base_url}/completions answered {response.status_code}: "
                f"{response.text[:300]}"
            )
        try:
            choices = sorted(response.json()["choices"], key=lambda c: int(c["index"]))
            if len(choices) != len(prompts):
                raise ValueError(f"{len(choices)} choices for {len(prompts)} prompts")
            return [_read(c["prompt_logprobs"], p) for c, p in zip(choices, prompts, strict=True)]
        except (ValueError, KeyError, TypeError) as exc:
            raise RemoteScorerError(
                f"{self.base_url}/completions: not vLLM's prompt_logprobs format: {exc}"
            ) from exc

    def score_cuts(
        self,
        context_ids: Sequence[int],
        cuts: Sequence[int],
        suffixes: Sequence[EncodedSuffix],
        *,
        chunk_size: int = 0,  # the local backend's knob; the server chunks its own way
    ) -> CutScores:
        """As `LMScorer.score_cuts`: one prompt per (cut, suffix), all in batched requests."""
        _check_cuts(context_ids, cuts)
        prompts = [
            [*context_ids[:cut], *suffix.ids[: suffix.answer_end]]
            for cut in cuts
            for suffix in suffixes
        ]
        values = self.prompt_logprobs(prompts)
        rows: list[list[float]] = []
        for k, cut in enumerate(cuts):
            row = []
            for b, suffix in enumerate(suffixes):
                lp = values[k * len(suffixes) + b]
                # Prompt position cut + j holds suffix token j; its log-prob is lp[cut + j - 1].
                row.append(
                    sum(lp[cut + j - 1] for j in range(suffix.answer_start, suffix.answer_end))
                )
            rows.append(row)
        return _cut_scores(cuts, rows, suffixes)

    def response_logprobs(
        self, prompts: Sequence[Sequence[int]], response: Sequence[int]
    ) -> np.ndarray[Any, np.dtype[np.float64]]:
        """(B, R): log p(response[j] | prompts[b] + response[:j]), as `rescoring` computes it."""
        if not prompts or any(not p for p in prompts):
            raise ValueError("every prompt needs at least one token")
        values = self.prompt_logprobs([[*p, *response] for p in prompts])
        out = np.empty((len(prompts), len(response)), np.float64)
        for b, prompt in enumerate(prompts):
            out[b] = values[b][len(prompt) - 1 : len(prompt) - 1 + len(response)]
        return out


def _read(entries: Any, prompt: list[int]) -> list[float]:
    """The prompt tokens' own log-probs from one choice's ``prompt_logprobs``."""
    if not isinstance(entries, list) or len(entries) != len(prompt):
        raise ValueError(f"prompt_logprobs has {len(entries or [])} entries for {len(prompt)}")
    out = []
    for j in range(1, len(prompt)):
        entry = entries[j]
        found = entry.get(str(prompt[j])) if isinstance(entry, dict) else None
        if not isinstance(found, dict) or not isinstance(found.get("logprob"), int | float):
            raise ValueError(f"no log-prob for prompt token {j} (id {prompt[j]})")
        out.append(float(found["logprob"]))
    return out


def load_remote(spec: str, timeout_s: float = 120.0) -> RemoteScorer:
    from judge_service.probe.loading import load_hf_tokenizer

    parsed = parse_remote_spec(spec)
    if parsed is None:
        raise ValueError(f"not a remote scorer spec: {spec!r}")
    model, url = parsed
    return RemoteScorer(model, url, load_hf_tokenizer(model), name=spec, timeout_s=timeout_s)
