"""Lock-in: where a trace already had the answer it ends with.

The trace is probed every N tokens (and at its start and end) for the **right**
answer (the reference), as the blog that defines lock-in does: the trace is locked
in at the first cut from which the reference's probability (all its tokens in
sequence, after the forced ending) is at least the threshold (0.9) at that cut and
at every later one. The tokens written after lock-in were spent on an answer the
model already had; summed over a run they compare two policies (same problems,
same probe) by how much they write past that point. ``answer="final"`` probes the
trace's own final answer instead (where a trace settled, right or wrong); it is an
option, not the default, because a wrong trace "locked in" on its own wrong answer
says nothing about credit on the way to the right one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from judge_service.probe.alignment import Aligner
from judge_service.probe.endings import Ending, encode_suffix
from judge_service.probe.progress import final_answer

if TYPE_CHECKING:
    from judge_service.probe.scorer import LMScorer


def lock_in_index(probabilities: Sequence[float], threshold: float = 0.9) -> int | None:
    """Index of the first cut from which every probability is >= threshold; None if none."""
    values = np.asarray(probabilities, dtype=np.float64)
    if values.size == 0 or values[-1] < threshold:
        return None
    below = np.flatnonzero(values < threshold)
    return int(below[-1]) + 1 if below.size else 0


def lockin_cuts(num_tokens: int, every: int) -> list[int]:
    """0, every, 2·every, ... and the end of the trace."""
    if every <= 0:
        raise ValueError("every must be positive")
    return sorted({*range(0, num_tokens, every), num_tokens})


def lockin_rollout(
    scorer: LMScorer,
    aligner: Aligner,
    rollout: dict[str, Any],
    ending: Ending,
    *,
    every: int = 4096,
    threshold: float = 0.9,
    answer: str = "reference",
    chunk_size: int = 1024,
) -> dict[str, Any]:
    """The lock-in record of one rollout (``answer``: the ``reference``, or its ``final``)."""
    aligned = aligner.align(rollout)
    total = aligned.trace.num_tokens
    target = (
        final_answer(rollout, aligned.trace.text)
        if answer == "final"
        else str(rollout.get("reference_answer") or "") or None
    )
    base = {"id": rollout.get("id"), "group_id": rollout.get("group_id"), "num_tokens": total}
    if not target:
        return {**base, "status": "no_answer", "answer": None, "locked_at": None}
    cuts = lockin_cuts(total, every)
    suffix = encode_suffix(aligner.probe, ending, target)
    scores = scorer.score_cuts(
        aligned.context_ids, [aligned.context_cut(c) for c in cuts], [suffix], chunk_size=chunk_size
    )
    probabilities = scores.probability[:, 0]
    index = lock_in_index(probabilities.tolist(), threshold)
    locked_at = None if index is None else cuts[index]
    after = 0 if locked_at is None else total - locked_at
    return {
        **base,
        "status": "ok",
        "answer": target,
        "answer_source": answer,
        "reward": rollout.get("reward"),
        "cuts": cuts,
        "probability": [round(float(p), 6) for p in probabilities],
        "threshold": threshold,
        "locked_at": locked_at,
        "tokens_after_lockin": after,
        "fraction_after_lockin": round(after / total, 6) if total else 0.0,
    }


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per run: how many traces locked in, and the tokens written after lock-in."""
    scored = [r for r in records if r.get("status") == "ok"]
    locked = [r for r in scored if r.get("locked_at") is not None]
    after = np.array([r["tokens_after_lockin"] for r in scored], dtype=np.float64)
    total = float(sum(r["num_tokens"] for r in scored))
    return {
        "n_traces": len(records),
        "n_scored": len(scored),
        "n_locked": len(locked),
        "locked_fraction": round(len(locked) / len(scored), 6) if scored else None,
        "tokens_after_lockin_total": int(after.sum()) if after.size else 0,
        "tokens_after_lockin_mean": round(float(after.mean()), 3) if after.size else None,
        "tokens_after_lockin_median": round(float(np.median(after)), 3) if after.size else None,
        "fraction_of_tokens_after_lockin": round(float(after.sum()) / total, 6) if total else None,
    }
