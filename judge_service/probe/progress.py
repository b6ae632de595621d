"""Span progress: the probe value at the start and end of every judged span.

For a rollout and its judge result, the probe value (mean log-probability of
the answer's tokens after the forced ending) is read at every span boundary,
at the start of the response and at its end, for up to four suffixes scored
in one batch per cut: the reference answer and a wrong answer, each with the
default ending and the second wording. A span's progress is the value at its
end minus the value at its start; its progress relative to the wrong answer
is that minus the same difference for the wrong answer (the margin gained).

The wrong answer is, in order: ``metadata.wrong_answer``; the trace's own final
answer when the trace ended wrong; for an integer reference a near miss
(reference + 10, as 418 for 408); else none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from judge_service.probe.alignment import Aligner
from judge_service.probe.endings import EncodedSuffix, EndingPair, encode_suffix
from judge_service.trace.answers import last_boxed

if TYPE_CHECKING:
    from judge_service.probe.scorer import LMScorer

_INTEGER = re.compile(r"^-?\d+$")


def normalize_answer(answer: str) -> str:
    """A light normal form for telling answers apart (not an equivalence checker)."""
    text = re.sub(r"\\[,!;: ]|\s+", "", answer)
    return text.rstrip(".").strip("$").rstrip(".")


def distractor(reference: str) -> str | None:
    """A plausible wrong answer for an integer reference: 408 -> 418, 7 -> 17, -5 -> 5."""
    text = normalize_answer(reference)
    if not _INTEGER.match(text):
        return None
    return str(int(text) + 10)


def final_answer(rollout: dict[str, Any], text: str) -> str | None:
    given = rollout.get("final_answer")
    if given:
        return str(given)
    boxed = last_boxed(text)
    return boxed.content if boxed and boxed.content.strip() else None


def ended_correct(rollout: dict[str, Any], final: str | None) -> bool | None:
    """The verifier's verdict (reward > 0) when there is one, else a string comparison."""
    reward = rollout.get("reward")
    if reward is not None:
        return float(reward) > 0
    reference = rollout.get("reference_answer")
    if final is None or not reference:
        return None
    return normalize_answer(final) == normalize_answer(str(reference))


def wrong_answer(
    rollout: dict[str, Any], reference: str, final: str | None, correct: bool | None
) -> tuple[str | None, str | None]:
    """The wrong answer to probe and where it came from."""
    given = (rollout.get("metadata") or {}).get("wrong_answer")
    if given:
        return str(given), "metadata"
    if final and correct is False and normalize_answer(final) != normalize_answer(reference):
        return final, "final_answer"
    near = distractor(reference)
    return (near, "distractor") if near else (None, None)


@dataclass(frozen=True)
class ProbeSettings:
    endings: EndingPair
    second_wording: bool = True
    chunk_size: int = 1024


def _round(values: Any) -> list[float]:
    return [round(float(v), 6) for v in np.asarray(values).reshape(-1)]


def probe_rollout(
    scorer: LMScorer,
    aligner: Aligner,
    rollout: dict[str, Any],
    result: dict[str, Any],
    settings: ProbeSettings,
) -> dict[str, Any]:
    """The probe record of one rollout: values at every cut, and progress per judged span."""
    reference = str(rollout.get("reference_answer") or "").strip()
    if not reference:
        raise ValueError("rollout has no reference_answer")
    aligned = aligner.align(rollout)
    total = aligned.trace.num_tokens
    final = final_answer(rollout, aligned.trace.text)
    correct = ended_correct(rollout, final)
    wrong, wrong_source = wrong_answer(rollout, reference, final, correct)

    names: list[str] = []
    suffixes: list[EncodedSuffix] = []
    wordings = [("", settings.endings.default)]
    if settings.second_wording:
        wordings.append(("_alt", settings.endings.alternative))
    for tag, ending in wordings:
        for kind, answer in (("reference", reference), ("wrong", wrong)):
            if answer:
                names.append(kind + tag)
                suffixes.append(encode_suffix(aligner.probe, ending, answer))

    spans = [s for s in result.get("spans") or [] if 0 <= int(s["start"]) < int(s["end"]) <= total]
    cuts = sorted({0, total, *(int(s["start"]) for s in spans), *(int(s["end"]) for s in spans)})
    scores = scorer.score_cuts(
        aligned.context_ids,
        [aligned.context_cut(c) for c in cuts],
        suffixes,
        chunk_size=settings.chunk_size,
    )
    value = {name: scores.mean_logprob[:, j] for j, name in enumerate(names)}
    at = {cut: k for k, cut in enumerate(cuts)}

    def delta(name: str, start: int, end: int) -> float | None:
        if name not in value:
            return None
        return round(float(value[name][at[end]] - value[name][at[start]]), 6)

    span_records = []
    for span in spans:
        start, end = int(span["start"]), int(span["end"])
        record = {
            "start": start,
            "end": end,
            "label": span.get("label"),
            "score": float(span.get("score", 0.0)),
            "confidence": float(span.get("confidence", 1.0)),
            "position": round((start + end) / 2 / total, 6),
            "length": end - start,
        }
        for tag in [t for t, _ in wordings]:
            progress = delta("reference" + tag, start, end)
            toward_wrong = delta("wrong" + tag, start, end)
            record["progress" + tag] = progress
            record["progress_wrong" + tag] = toward_wrong
            record["progress_rel" + tag] = (
                None
                if progress is None or toward_wrong is None
                else round(progress - toward_wrong, 6)
            )
        span_records.append(record)

    return {
        "id": rollout.get("id"),
        "group_id": rollout.get("group_id"),
        "reward": rollout.get("reward"),
        "correct": correct,
        "finished": final is not None,
        "status": result.get("status"),
        "num_tokens": total,
        "model": scorer.name,
        "ending_family": settings.endings.family,
        "mapped_tokenizer": aligned.mapped,
        "answers": {
            "reference": reference,
            "final": final,
            "wrong": wrong,
            "wrong_source": wrong_source,
        },
        "answer_tokens": {
            name: int(n) for name, n in zip(names, scores.num_answer_tokens, strict=True)
        },
        "cuts": cuts,
        "values": {name: _round(v) for name, v in value.items()},
        "spans": span_records,
    }
