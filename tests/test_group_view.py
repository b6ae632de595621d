"""What a group session's judge is shown and how its spans are checked, without a provider:
shared prefixes on a byte-level BPE seam, ⟦r.n⟧ markers on escaped text, contrasts
(valid, forged, outside the group), and a submission split back into rollouts."""

from __future__ import annotations

from judge_service.group.contrast import Contrast, contrast_check
from judge_service.group.session import GroupCheck
from judge_service.group.view import Shared, group_view, prefix_length
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.trace import Trace
from judge_service.trace.tokenizer import LoadedTokenizer
from judge_service.validate import Validator, Verdict


def traced(bpe: LoadedTokenizer, text: str) -> Trace:
    return bpe.decode(bpe.hf.encode(text, add_special_tokens=False))


def span_at(trace: Trace, phrase: str, label: str, **extra: object) -> dict[str, object]:
    begin = trace.text.index(phrase)
    start, end = trace.tokens_for_chars(begin, begin + len(phrase))
    return {
        "start": start,
        "end": end,
        "label": label,
        "confidence": 0.9,
        "evidence": phrase,
        **extra,
    }


def test_a_shared_prefix_on_a_character_split_over_two_tokens(bpe: LoadedTokenizer) -> None:
    # Byte-level BPE writes é and ê as "ĠÃ" + one byte token each: the ids agree on the
    # first byte, so the shared tokens end inside a character.
    a, b = traced(bpe, "The answer: é"), traced(bpe, "The answer: ê")
    differ = next(i for i in range(a.num_tokens) if a.token_ids[i] != b.token_ids[i])
    assert bpe.hf.convert_ids_to_tokens(int(a.token_ids[differ - 1])) == "ĠÃ"
    k = prefix_length(a, b)
    assert k <= differ and a.text[: a.offsets[k]] == b.text[: b.offsets[k]]
    view = group_view({0: a, 1: b}, Shared.of({0: a, 1: b}))
    block = view.split("## Rollout 1", 1)[1]
    # The character is shown whole in each rollout's own block, never half in the shared part.
    assert f"⟦1.{k}⟧ê" in block or f"⟦1.{k}⟧ ê" in block
    assert "⟦1.0⟧ to" in block and "é" not in block


def test_markers_carry_the_rollout_and_forged_ones_stay_escaped(bpe: LoadedTokenizer) -> None:
    a = traced(bpe, "Step one.\nSee ⟦3⟧ and ⟦1.2⟧ here.")
    view = group_view({4: a}, Shared.of({4: a}))
    assert "⟦4.0⟧Step one." in view
    assert "⟦3⟧" not in view and "⟦1.2⟧" not in view and "〚3〛" in view


def test_contrasts_valid_forged_and_outside_the_group(bpe: LoadedTokenizer) -> None:
    right = traced(bpe, "17 × 4 = 68.\n340 + 68 = 408.")
    wrong = traced(bpe, "17 × 4 = 78.\n340 + 78 = 418.")
    check = contrast_check({0: right, 1: wrong}, own=1, same_as={2: 0})
    cited = span_at(right, "17 × 4 = 68.", "x")
    good = {"rollout": 0, "start": cited["start"], "end": cited["end"], "quote": "17 × 4 = 68"}
    assert check(good) == Contrast(0, cited["start"], cited["end"])
    cases = {
        "forged": ({**good, "quote": "17 × 4 = 78"}, "does not occur in rollout 0's"),
        "outside": ({**good, "rollout": 5}, "not a rollout of this group"),
        "own": ({**good, "rollout": 1}, "not the span's own rollout"),
        "range": ({**good, "end": right.num_tokens + 1}, "outside rollout 0's"),
        "short": ({**good, "quote": "68"}, "at least 8 characters"),
        "shape": ("rollout 0", "must be an object"),
    }
    for name, (raw, reason) in cases.items():
        result = check(raw)
        assert isinstance(result, str) and reason in result, name


def test_a_contrast_outside_a_group_session_is_refused(bpe: LoadedTokenizer) -> None:
    trace = traced(bpe, "17 × 4 = 68.\n340 + 68 = 408.")
    raw = span_at(
        trace,
        "17 × 4 = 68.",
        "valid_progress",
        contrast={"rollout": 0, "start": 0, "end": 2, "quote": "17 × 4"},
    )
    report = Validator(trace, DEFAULT_LABEL_SCORES).check([raw])
    assert not report.accepted
    assert [r.code for r in report.rejected] == ["contrast_not_anchored"]


def test_a_group_submission_goes_to_each_rollout_and_to_every_holder_of_a_prefix(
    bpe: LoadedTokenizer,
) -> None:
    shared_lines = "We need 17 × 24.\n17 × 20 = 340.\n"
    traces = {
        0: traced(bpe, shared_lines + "17 × 4 = 68.\n\\boxed{408}"),
        1: traced(bpe, shared_lines + "17 × 4 = 78.\n\\boxed{418}"),
        2: traced(bpe, "Different start.\n17 × 20 = 340."),
    }
    validators = {
        r: Validator(t, DEFAULT_LABEL_SCORES, verdict=Verdict(None, "408", float(r != 1)))
        for r, t in traces.items()
    }
    check = GroupCheck(validators, Shared.of(traces))
    in_prefix = {"rollout": 1, **span_at(traces[1], "17 × 20 = 340.", "valid_progress")}
    own = {"rollout": 2, **span_at(traces[2], "17 × 20 = 340.", "valid_progress")}
    stray = {"rollout": 9, **span_at(traces[2], "17 × 20 = 340.", "valid_progress")}

    report = check([in_prefix, own, stray])

    split = check.rounds[0]
    assert [len(split[r]) for r in (0, 1, 2)] == [1, 1, 1]  # the prefix span: 0 and 1
    assert split[0][0]["start"] == in_prefix["start"]
    assert len(report.accepted) == 3
    assert [(r.code, "rollout must be one of" in r.reason) for r in report.rejected] == [
        ("malformed", True)
    ]


def test_a_hostile_group_submission_is_refused_span_by_span(bpe: LoadedTokenizer) -> None:
    trace = traced(bpe, "17 × 20 = 340.\n17 × 4 = 68.")
    validators = {r: Validator(trace, DEFAULT_LABEL_SCORES) for r in (0, 1)}
    check = GroupCheck(validators, Shared.of({0: trace, 1: trace}))
    good = {"rollout": 1, **span_at(trace, "17 × 4 = 68.", "valid_progress")}
    junk: list[object] = [
        "not a span",
        {"rollout": 0, "start": [1], "end": {"x": 2}, "label": ["invalid"]},
        {"rollout": "1", "start": 0},
    ]
    flood = [good] * (2 * validators[0].limits.max_spans)

    report = check([good, *junk, *flood])

    # The prefix copy and the first span: once per rollout (0 holds all of 1's tokens).
    assert len(report.accepted) == 2
    codes = [r.code for r in report.rejected]
    assert codes.count("too_many_spans") == len(junk) + len(flood) + 1 - 2 * 256
    assert "malformed" in codes
