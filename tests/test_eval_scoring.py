"""Scoring for ``judge-service eval`` (issue 11): ProcessBench F1, token-level span
precision/recall and boundary error on hand-computed cases; ProcessBench steps as token
ranges with byte-level BPE tokenizers, seams that BPE merges included; the predicted first
wrong step."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from judge_service.evaluation.metrics import (
    Labelled,
    boundary_errors,
    latency_summary,
    processbench_scores,
    token_scores,
)
from judge_service.evaluation.records import Case
from judge_service.evaluation.report import predicted_step
from judge_service.evaluation.segment import SEPARATOR, Segmented, segment_steps
from judge_service.schemas import Result, Rollout, SpanOut
from judge_service.trace.tokenizer import LoadedTokenizer, TokenizerCache

# --- metrics on hand-computed cases -------------------------------------------------------


def test_processbench_f1_is_the_harmonic_mean_of_the_two_accuracies() -> None:
    pairs = [
        (2, 2),  # erroneous, found
        (0, 1),  # erroneous, a later step named
        (1, None),  # erroneous, the record failed: a miss
        (-1, -1),  # correct, passed
        (-1, 0),  # correct, flagged
        (-1, -1),  # correct, passed
    ]
    scores = processbench_scores(pairs)
    assert scores["acc_error"] == pytest.approx(1 / 3)
    assert scores["acc_correct"] == pytest.approx(2 / 3)
    assert scores["f1"] == pytest.approx(2 * (1 / 3) * (2 / 3) / (1 / 3 + 2 / 3))  # 4/9
    assert scores["counts"] == {
        "records": 6,
        "erroneous": 3,
        "correct": 3,
        "erroneous_matched": 1,
        "correct_matched": 2,
        "failed": 1,
    }


def test_a_failed_correct_record_is_a_miss_not_a_pass() -> None:
    # predicted None never equals -1: a judge that fails on everything scores 0, not 1
    scores = processbench_scores([(-1, None), (-1, -1)])
    assert scores["acc_correct"] == 0.5 and scores["counts"]["failed"] == 1
    assert processbench_scores([(0, -1), (-1, 0)])["f1"] == 0.0  # both accuracies 0
    assert processbench_scores([(-1, -1)])["f1"] is None  # no erroneous sample: undefined


def test_token_precision_and_recall_by_label() -> None:
    gold = [Labelled(2, 5, "invalid"), Labelled(5, 9, "valid_progress")]
    predicted = [Labelled(3, 6, "invalid"), Labelled(6, 10, "valid_progress")]
    scores = token_scores([(10, gold, predicted)])
    invalid = scores["by_label"]["invalid"]  # gold {2,3,4}, predicted {3,4,5}
    assert (invalid["true_positive_tokens"], invalid["gold_tokens"]) == (2, 3)
    assert invalid["precision"] == pytest.approx(2 / 3)
    assert invalid["recall"] == pytest.approx(2 / 3)
    valid = scores["by_label"]["valid_progress"]  # gold {5..8}, predicted {6..9}
    assert valid["precision"] == pytest.approx(3 / 4) and valid["recall"] == pytest.approx(3 / 4)
    assert scores["micro"]["precision"] == pytest.approx(5 / 7)
    # a failed record predicts nothing: its gold tokens are all missed
    with_failure = token_scores(
        [(10, gold, predicted), (6, [Labelled(0, 4, "valid_progress")], None)]
    )
    valid = with_failure["by_label"]["valid_progress"]
    assert valid["recall"] == pytest.approx(3 / 8) and valid["precision"] == pytest.approx(3 / 4)
    # a label only predicted: recall undefined, precision 0
    extra = token_scores([(4, [], [Labelled(0, 2, "neutral")])])["by_label"]["neutral"]
    assert extra["precision"] == 0.0 and extra["recall"] is None


def test_boundary_error_pairs_each_gold_span_with_its_best_overlap() -> None:
    gold = [
        Labelled(2, 5, "invalid"),
        Labelled(5, 9, "valid_progress"),
        Labelled(0, 2, "unsupported"),  # nothing of its label: unmatched
    ]
    predicted = [
        Labelled(2, 7, "invalid"),  # start exact, end off by 2
        Labelled(0, 6, "valid_progress"),  # overlaps gold [5, 9) by 1 token
        Labelled(6, 10, "valid_progress"),  # by 3: the match, off by 1 and 1
        Labelled(0, 2, "invalid"),  # another label: never a match for unsupported
    ]
    errors = boundary_errors([(gold, predicted)])
    assert errors["matched"] == 2 and errors["unmatched"] == 1 and errors["exact"] == 0
    assert errors["mean_start"] == pytest.approx(0.5)  # (0 + 1) / 2
    assert errors["mean_end"] == pytest.approx(1.5)  # (2 + 1) / 2
    assert errors["mean"] == pytest.approx(1.0)  # per boundary
    failed = boundary_errors([([Labelled(0, 3, "invalid")], None)])
    assert failed["unmatched"] == 1 and failed["mean"] is None


def test_latency_percentiles() -> None:
    summary = latency_summary([10, 20, 30, 40, 1000])
    assert summary["p50"] == 30 and summary["n"] == 5
    assert summary["p95"] == pytest.approx(40 + 0.8 * 960)  # linear between ranks
    assert latency_summary([])["p50"] is None


# --- steps as token ranges ----------------------------------------------------------------


def _char_step(steps: list[str], position: int) -> int | None:
    """Reference: the step a char belongs to, None for a separator char (char by char)."""
    cursor = 0
    for index, step in enumerate(steps):
        if cursor <= position < cursor + len(step):
            return index
        cursor += len(step) + len(SEPARATOR)
        if position < cursor:
            return None
    return None


def _assert_segmentation(tokenizer: LoadedTokenizer, steps: list[str], seg: Segmented) -> None:
    trace = tokenizer.decode(seg.token_ids)
    assert trace.text == SEPARATOR.join(steps)
    assert list(seg.step_starts) == sorted(seg.step_starts) and seg.step_starts[0] == 0
    owners = [seg.step_of(t) for t in range(seg.num_tokens)]
    assert owners == sorted(owners)  # each step's tokens are one contiguous range
    previous = 0
    for t in range(seg.num_tokens):
        first, past = trace.char_range(t, t + 1)
        last = past - 1 if past > first else first
        expected = _char_step(steps, last)
        # a token ending in a separator belongs to the step before it
        expected = previous if expected is None else expected
        assert owners[t] == expected, (t, trace.token_text(t))
        previous = owners[t]


def test_steps_of_a_byte_level_bpe_trace(bpe: LoadedTokenizer) -> None:
    steps = [
        "Let me compute 17 × 24 step by step.",
        "17 × 24 = 17 × 20 + 17 × 4 = 340 + 68 = 408.",
        "Première étape : 数学 😀 fine.",
        "So the answer is \\boxed{408}.",
    ]
    seg = segment_steps(bpe, steps, "line 1")
    _assert_segmentation(bpe, steps, seg)
    trace = bpe.decode(seg.token_ids)
    for index, step in enumerate(steps):
        start, end = seg.step_range(index)
        assert trace.span_text(start, end).strip("\n") == step  # no merge at these seams


QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _seam_tokenizer(directory: Path, split: str | None) -> LoadedTokenizer:
    """A byte-level BPE trained where steps often end in "." and open with "Then". With no
    pre-tokenizer split a merge may cross the blank line; with Qwen2's split (`QWEN2_SPLIT`)
    ".\n\n" is one pre-token and becomes one token."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(7)
    corpus = [
        f"Add {rng.randint(2, 99)} and {rng.randint(2, 99)}.\n\nThen {rng.randint(2, 99)} × 2 "
        f"= {rng.randint(2, 99)}.\n\nSo the answer is {rng.randint(2, 99)}."
        for _ in range(400)
    ]
    tokenizer = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.pre_tokenizer = (
        byte_level
        if split is None
        else pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(split), behavior="isolated"), byte_level]
        )
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=420,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>")  # type: ignore[no-untyped-call]
    fast.save_pretrained(str(directory))
    return TokenizerCache().get(str(directory))


@pytest.fixture(scope="module")
def seam_bpe(tmp_path_factory: pytest.TempPathFactory) -> LoadedTokenizer:
    return _seam_tokenizer(tmp_path_factory.mktemp("tok") / "seam", None)


@pytest.fixture(scope="module")
def qwen2_bpe(tmp_path_factory: pytest.TempPathFactory) -> LoadedTokenizer:
    return _seam_tokenizer(tmp_path_factory.mktemp("tok") / "qwen2", QWEN2_SPLIT)


def test_a_token_merged_across_a_seam_belongs_to_one_step(seam_bpe: LoadedTokenizer) -> None:
    steps = ["Add 3 and 4.", "Then 7 × 2 = 14.", "So the answer is 14."]
    seg = segment_steps(seam_bpe, steps, "line 1")
    trace = seam_bpe.decode(seg.token_ids)
    seams = [len(steps[0]), len(steps[0]) + len(SEPARATOR) + len(steps[1])]
    straddling = [
        t
        for t in range(seg.num_tokens)
        for seam in seams
        if trace.offsets[t] < seam + len(SEPARATOR) < trace.offsets[t + 1]
    ]
    assert straddling, "the tokenizer was meant to merge across a seam: " + repr(
        [trace.token_text(t) for t in range(seg.num_tokens)]
    )
    _assert_segmentation(seam_bpe, steps, seg)
    for t in straddling:  # it reaches into the next step: that step holds it
        next_step = next(i for i, s in enumerate(seams) if trace.offsets[t] < s + 2) + 1
        assert seg.step_of(t) == next_step
        # an invalid span starting on it marks that next step
        case = Case(1, Rollout(id="r", response_token_ids=seg.token_ids), 1, seg)
        span = SpanOut(start=t, end=t + 1, label="invalid", score=-1, confidence=1, evidence="")
        result = Result(id="r", status="ok", spans=[span])
        assert predicted_step(case, result) == next_step


def test_a_period_merged_with_the_blank_line_stays_with_its_step(
    qwen2_bpe: LoadedTokenizer,
) -> None:
    steps = ["Add 3 and 4.", "Then 7 × 2 = 14.", "So the answer is 14."]
    seg = segment_steps(qwen2_bpe, steps, "line 1")
    trace = qwen2_bpe.decode(seg.token_ids)
    merged = [t for t in range(seg.num_tokens) if trace.token_text(t) == ".\n\n"]
    assert len(merged) == 2, [trace.token_text(t) for t in range(seg.num_tokens)]
    _assert_segmentation(qwen2_bpe, steps, seg)
    assert [seg.step_of(t) for t in merged] == [0, 1]
    assert [trace.token_text(seg.step_range(i)[0]) for i in (1, 2)] == ["Then", "So"]


def test_predicted_step_is_the_earliest_invalid_span(bpe: LoadedTokenizer) -> None:
    steps = ["2 + 2 = 4.", "4 × 3 = 13.", "13 - 1 = 11.", "\\boxed{11}"]
    seg = segment_steps(bpe, steps, "line 1")
    case = Case(1, Rollout(id="r", response_token_ids=seg.token_ids), 1, seg)

    def span(step: int, label: str) -> SpanOut:
        start, end = seg.step_range(step)
        return SpanOut(start=start, end=end, label=label, score=0, confidence=1, evidence="")

    def result(*spans: SpanOut, status: str = "ok") -> Result:
        return Result.model_validate({"id": "r", "status": status, "spans": spans})

    assert predicted_step(case, result(span(2, "invalid"), span(1, "invalid"))) == 1
    assert predicted_step(case, result(span(0, "unsupported"), span(3, "invalid"))) == 3
    assert predicted_step(case, result(span(0, "valid_progress"))) == -1
    assert predicted_step(case, result(status="failed")) is None
