"""Log-probabilities of one response under several prompts, in one batched pass.

CSCR and CoRT rescore the sampled response under counterfactual prompts (CSCR:
the plain prompt and the answer asserted correct / incorrect, three rows; CoRT:
the rubric shown / not shown). The prompts share their first tokens (the chat
template, the problem), so:

* the common prefix runs once, as one row, into a `DynamicCache`;
* the cache is expanded to B rows and each row's own tail + the response run
  on top of it as one right-padded batch (a causal model's real positions never
  see later pads), a chunk at a time, so the logits of a long response never
  sit in memory at once;
* only the log-prob of each next token is kept (a gather and a logsumexp per
  chunk), never the (B, T, V) log-softmax.

So B prompts over a T-token response cost about |common| + B·(|tail| + T)
forward tokens instead of B·(|prompt| + T), and `naive_response_logprobs` (one
full pass per prompt, no cache) is the reference the test compares with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from judge_service.methods.remote import RemoteScorer
    from judge_service.probe.scorer import LMScorer

FloatArray = npt.NDArray[np.float64]


def _common(prompts: Sequence[Sequence[int]]) -> int:
    n = min(len(p) for p in prompts)
    for k in range(n):
        if any(p[k] != prompts[0][k] for p in prompts[1:]):
            return k
    return n


def response_logprobs(
    scorer: LMScorer | RemoteScorer,
    prompts: Sequence[Sequence[int]],
    response: Sequence[int],
    *,
    chunk_size: int = 256,
) -> FloatArray:
    """(B, R): log p(response[j] | prompts[b] + response[:j]) for every prompt b."""
    from judge_service.methods.remote import RemoteScorer

    if isinstance(scorer, RemoteScorer):  # the server's prompt log-probs, one prompt per row
        return scorer.response_logprobs(prompts, response)
    import torch

    if not prompts or any(not p for p in prompts):
        raise ValueError("every prompt needs at least one token")
    rows = len(prompts)
    # Each row keeps at least one token of its own: its last logit predicts response[0].
    shared = min(_common(prompts), min(len(p) for p in prompts) - 1)
    tails = [list(p[shared:]) + list(response) for p in prompts]
    length = max(len(t) for t in tails)
    padded = [t + [t[0]] * (length - len(t)) for t in tails]
    with torch.inference_mode():
        cache = scorer._new_cache()
        device = scorer.device
        prefix = torch.tensor([list(prompts[0][:shared])], dtype=torch.long, device=device)
        for at in range(0, shared, chunk_size):
            scorer._forward(prefix[:, at : at + chunk_size], at, cache, 1)
        if shared and rows > 1:
            for layer in cache.layers:  # views; the first batched pass materializes B rows
                layer.keys = layer.keys.expand(rows, -1, -1, -1)
                layer.values = layer.values.expand(rows, -1, -1, -1)
        ids = torch.tensor(padded, dtype=torch.long, device=device)
        # next_lp[b, p]: log-prob of padded[b][p + 1] given everything up to p.
        next_lp = np.zeros((rows, length), np.float64)
        for at in range(0, length, chunk_size):
            piece = ids[:, at : at + chunk_size]
            logits = scorer._forward(piece, shared + at, cache, 0).float()
            stop = min(at + chunk_size, length)
            targets = ids[:, at + 1 : stop + 1]
            width = targets.shape[1]  # the last position of the whole row predicts nothing
            picked = logits[:, :width].gather(-1, targets[..., None])[..., 0]
            norm = torch.logsumexp(logits[:, :width], dim=-1)
            next_lp[:, at : at + width] = (picked - norm).double().cpu().numpy()
    out = np.empty((rows, len(response)), np.float64)
    for b, prompt in enumerate(prompts):
        first = len(prompt) - shared - 1  # the row position whose logit predicts response[0]
        out[b] = next_lp[b, first : first + len(response)]
    return out


def naive_response_logprobs(
    scorer: LMScorer, prompts: Sequence[Sequence[int]], response: Sequence[int]
) -> FloatArray:
    """The reference: one full pass over prompt + response per prompt, no cache."""
    import torch

    out = np.empty((len(prompts), len(response)), np.float64)
    with torch.inference_mode():
        for b, prompt in enumerate(prompts):
            full = torch.tensor([[*prompt, *response]], dtype=torch.long, device=scorer.device)
            logprobs = torch.log_softmax(scorer._forward(full, 0, None)[0].float(), dim=-1)
            for j, token in enumerate(response):
                out[b, j] = float(logprobs[len(prompt) + j - 1, token])
    return out


def per_policy_token(values: FloatArray, boundaries: npt.NDArray[np.int64]) -> FloatArray:
    """Sum model-token values (R,) over each policy token [boundaries[t], boundaries[t+1]):
    the log-prob of a policy token's text when the model tokenizes it differently. A
    policy token owning no model token (a byte of a character the next one completes)
    gets 0."""
    sums = np.concatenate([[0.0], np.cumsum(values)])
    return np.asarray(sums[boundaries[1:]] - sums[boundaries[:-1]], np.float64)
