"""Span progress: the probe value at the start and end of every judged span.

For a rollout and its judge result, the probe value (mean log-probability of
the answer's tokens after the forced ending) is read at every span boundary,
at the start of the response and at its end, for up to four suffixes scored
in one batch per cut: the reference answer and a wrong answer, each with the
default ending and the second wording. A span's progress is the value at its
end minus the value at its start; its progress relative to the wrong answer
is that minus the same difference for the wrong answer (the margin gained).

The wrong answer is the trace's own final answer when the trace ended wrong,
else the most common wrong final answer of the same group (another sample of
the same policy), else none. It never comes from a rule of ours (an earlier
version used reference + 10, the very error the template generator injected,
so judge, data and distractor shared one generator).

Audit v2 adds, per record, ``answer_cut``: the last cut before the trace starts
writing its final answer block (answer_cut.py), and ``gate_cut``: the last cut
before the trace first writes its final answer or the reference, which the gate
reads (0: the answer comes before any reasoning, and the gate leaves the trace
out). Both are probed like any other cut. Per span ``overlaps_final`` (it ends after that cut) and
``mentions_answer`` (its text holds the reference or the wrong answer), so the
effects can be reported without the spans where copying moves the probe.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from judge_service.probe.alignment import Aligner
from judge_service.probe.answer_cut import char_to_cut, final_answer_start, gate_start, mentions
from judge_service.probe.endings import EncodedSuffix, EndingPair, encode_suffix
from judge_service.trace.boxed import last_boxed

if TYPE_CHECKING:
    from judge_service.probe.scorer import LMScorer


def normalize_answer(answer: str) -> str:
    """A light normal form for telling answers apart (not an equivalence checker)."""
    text = re.sub(r"\\[,!;: ]|\s+", "", answer)
    return text.rstrip(".").strip("$").rstrip(".")


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
    reference: str, final: str | None, correct: bool | None, group_wrong: str | None = None
) -> tuple[str | None, str | None]:
    """The wrong answer to probe and where it came from: ``final_answer`` | ``group`` | None."""
    if final and correct is False and normalize_answer(final) != normalize_answer(reference):
        return final, "final_answer"
    if group_wrong and normalize_answer(group_wrong) != normalize_answer(reference):
        return group_wrong, "group"
    return None, None


def group_wrong_answers(rollouts: list[dict[str, Any]], aligner: Aligner) -> dict[str, str]:
    """Group id -> the most common wrong final answer among its rollouts (first seen on ties)."""
    counts: dict[str, Counter[str]] = {}
    for rollout in rollouts:
        group, reference = rollout.get("group_id"), rollout.get("reference_answer")
        if group is None or not reference:
            continue
        final = rollout.get("final_answer")
        if not final:
            name = rollout.get("tokenizer") or aligner.probe_name
            try:
                text = aligner.policy_tokenizer(name).decode(rollout["response_token_ids"]).text
            except Exception:  # an undecodable rollout is skipped here and reported by the probe
                continue
            final = final_answer(rollout, text)
        if not final or ended_correct(rollout, str(final)) is not False:
            continue
        if normalize_answer(str(final)) != normalize_answer(str(reference)):
            counts.setdefault(str(group), Counter())[normalize_answer(final)] += 1
    return {group: c.most_common(1)[0][0] for group, c in counts.items()}


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
    group_wrong: str | None = None,
) -> dict[str, Any]:
    """The probe record of one rollout: values at every cut, and progress per judged span;
    `group_wrong` is the group's wrong answer (`group_wrong_answers`)."""
    reference = str(rollout.get("reference_answer") or "").strip()
    if not reference:
        raise ValueError("rollout has no reference_answer")
    aligned = aligner.align(rollout)
    total = aligned.trace.num_tokens
    final = final_answer(rollout, aligned.trace.text)
    correct = ended_correct(rollout, final)
    wrong, wrong_source = wrong_answer(reference, final, correct, group_wrong)
    found = final_answer_start(aligned.trace.text, final) if final else None
    answer_cut = None if found is None else char_to_cut(aligned.trace.offsets, found[0])
    # The gate reads before the answer is first written, final or reference (answer_cut.py).
    first = gate_start(aligned.trace.text, final, reference) if final else None
    gate_cut = None if first is None else char_to_cut(aligned.trace.offsets, first[0])

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
    cuts = sorted({*cuts, *(c for c in (answer_cut, gate_cut) if c is not None)})
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
            "overlaps_final": answer_cut is not None and end > answer_cut,
            "mentions_answer": mentions(aligned.trace.span_text(start, end), [reference, wrong]),
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
        "answer_cut": answer_cut,  # the last cut before the final answer (None: no answer)
        "answer_rule": None if found is None else found[1],
        "gate_cut": gate_cut,  # before the first occurrence of the final or reference answer
        "gate_rule": None if first is None else first[1],
        "cuts": cuts,
        "values": {name: _round(v) for name, v in value.items()},
        "spans": span_records,
    }
