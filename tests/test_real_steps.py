"""Credit on solutions written as capable models write them (issue 46): markdown headings,
lists, bold labels, rules and display math with ``\\text{}`` labels; siblings that say the
same thing in other words, order and format; a reference solution as the one correct
sibling of a rollout judged alone. Judged end to end by the rules judge and the group
route's own functions on a real byte-level BPE tokenizer."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.group.divergence import Member, divergences
from judge_service.group.judge import judge_group
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Result, Rollout
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import LiveServer

NEGATIVE = {"invalid", "unsupported", "unproductive_repetition"}
PROBLEM = (
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast and bakes muffins "
    "with four. She sells the rest at $2 per egg. How much does she make every day?"
)
RIGHT = """### Step 1: Count the eggs
Janet has \\(16 - 3 - 4 = 9\\) eggs left.

---

### Step 2: Money
**Income:**
\\[
9 \\times 2 = 18
\\]

The answer is \\(\\boxed{18}\\)."""
# The same route, reworded, in another order of words, as a list, in plain text.
REWORDED = """1. She keeps back 3 + 4 = 7 eggs, so 16 - 7 = 9 remain for the market.
2. At two dollars each she earns 2 * 9 = 18 dollars.

Final answer: \\boxed{18}"""
# Markdown-structured, wrong at Step 1 (forgets the muffins); its list marker "2." and
# its heading numbers are structure, and the wrong answer 26 is no step of its own.
WRONG = """### Step 1: Eggs left to sell
After breakfast she has \\(16 - 3 = 13\\) eggs left.

### Step 2: Money
- Price per egg: \\$2
- Income: \\(13 \\times 2 = 26\\)

**Answer:** \\(\\boxed{26}\\)"""


def member(tok: LoadedTokenizer, text: str, reward: float | None, **extra: Any) -> Member:
    trace = tok.decode(tok.hf.encode(text, add_special_tokens=False))
    assert trace.text == text
    return Member(trace, reference_answer="18", reward=reward, problem=PROBLEM, **extra)


def rollout(
    tok: LoadedTokenizer, name: str, text: str, reward: float | None, **extra: Any
) -> Rollout:
    ids = tok.hf.encode(text, add_special_tokens=False)
    return Rollout(
        id=name,
        group_id="ducks",
        problem=PROBLEM,
        response_token_ids=ids,
        reward=reward,
        reference_answer="18",
        **extra,
    )


def negatives(result: Result) -> list[str]:
    return [s.evidence for s in result.spans if s.label in NEGATIVE]


def test_a_markdown_wrong_rollout_is_pointed_at_its_wrong_step_not_a_heading(
    bpe: LoadedTokenizer,
) -> None:
    for siblings in ([RIGHT], [REWORDED], [REWORDED, RIGHT]):
        group = [member(bpe, s, 1.0) for s in siblings] + [member(bpe, WRONG, 0.0)]
        (point,) = divergences(group)
        assert point.text == "After breakfast she has \\(16 - 3 = 13\\) eggs left."
        assert "#" not in point.text and point.agreed == 0


def test_a_group_of_markdown_rollouts_credits_no_heading_or_list_marker(
    bpe: LoadedTokenizer, bpe_dir: Any
) -> None:
    engine = Engine(Settings(default_tokenizer=str(bpe_dir)))
    group = [rollout(bpe, "right", RIGHT, 1.0), rollout(bpe, "wrong", WRONG, 0.0)]
    response = asyncio.run(judge_group(engine, group, Options()))
    wrong = response.results[1]
    assert wrong.status == "ok"
    evidence = negatives(wrong)
    # The first negative credit is on the wrong step; no heading, list marker or rule
    # carries one.
    assert evidence[0].startswith("After breakfast she has")
    assert not any(e.lstrip().startswith(("#", "-", "**", "2.")) for e in evidence)
    assert negatives(response.results[0]) == []


def test_siblings_reordered_and_reformatted_point_the_same_step(bpe: LoadedTokenizer) -> None:
    # The price step written first, the count second, one as display math, one in words.
    reordered = (
        "Each egg sells for $2.\n\n"
        "\\[\n\\text{Eggs} = 16 - (3 + 4) = 9\n\\]\n\n"
        "She makes nine times two, that is 18 dollars: \\boxed{18}"
    )
    baseline = divergences([member(bpe, RIGHT, 1.0), member(bpe, WRONG, 0.0)])
    other = divergences([member(bpe, reordered, 1.0), member(bpe, WRONG, 0.0)])
    assert [(p.start, p.end) for p in other] == [(p.start, p.end) for p in baseline]


def test_a_correct_rollout_by_another_route_gives_no_false_point(bpe: LoadedTokenizer) -> None:
    # Another route to 18 (eggs counted after each use): its values 13 and 9 are its own,
    # and rejoin the correct route. Judged against RIGHT it is correct, so no point; and a
    # wrong rollout that shares its first true step is pointed after that step, not on it.
    start = "She has 16 - 3 = 13 eggs after breakfast.\nThen 13 - 4 = 9 for sale.\n"
    route = start + "So 9 × 2 = 18: \\boxed{18}"
    wrong_late = start + "So 9 × 3 = 27: \\boxed{27}"
    assert divergences([member(bpe, RIGHT, 1.0), member(bpe, route, 1.0)]) == []
    (point,) = divergences(
        [member(bpe, RIGHT, 1.0), member(bpe, route, 1.0), member(bpe, wrong_late, 0.0)]
    )
    assert point.text == "So 9 × 3 = 27: \\boxed{27}"


def test_a_false_computation_in_display_math_with_text_labels_is_found(
    bpe: LoadedTokenizer, bpe_dir: Any
) -> None:
    engine = Engine(Settings(default_tokenizer=str(bpe_dir)))
    labelled = (
        "Adding the weights:\n"
        "\\[ 8 \\text{ pounds} \\text{ (math)} + 4 \\text{ pounds} + 3 \\text{ pounds} = 16 "
        "\\text{ pounds} \\]\n"
        "\\[ \\text{Total fruits} = 52 + 24 \\] \\[ \\text{Total fruits} = 86 \\]\n"
        "She paid $3.5 * 4000 = $14,500 for the milk."
    )
    ids = bpe.hf.encode(labelled, add_special_tokens=False)
    result = asyncio.run(engine.judge_one(Rollout(id="t", response_token_ids=ids), Options()))
    found = [s.evidence for s in result.spans if s.label == "invalid"]
    assert any("= 16" in e for e in found)
    assert any("86" in e for e in found)
    assert any("14,500" in e for e in found)
    # The same with true values: no negative label (units differ: not read as 2 = 120).
    true = (
        "\\[ 8 \\text{ pounds} + 4 \\text{ pounds} + 3 \\text{ pounds} = 15 \\text{ pounds} \\]\n"
        "\\[ 2 \\text{ hours} = 120 \\text{ minutes} \\]"
    )
    ids = bpe.hf.encode(true, add_special_tokens=False)
    result = asyncio.run(engine.judge_one(Rollout(id="u", response_token_ids=ids), Options()))
    assert negatives(result) == []


def test_a_list_marker_equal_to_the_wrong_answer_is_not_the_answer(
    bpe: LoadedTokenizer, bpe_dir: Any
) -> None:
    engine = Engine(Settings(default_tokenizer=str(bpe_dir)))
    # The answer's last mention is a list marker: markup, not the answer.
    text = "She has 2 left over.\nCosts:\n1. Rent: 5 dollars\n2. Food: 3 dollars"
    ids = bpe.hf.encode(text, add_special_tokens=False)
    rollout_ = Rollout(id="t", response_token_ids=ids, final_answer="2", reference_answer="7")
    result = asyncio.run(engine.judge_one(rollout_, Options()))
    invalid = [s for s in result.spans if s.label == "invalid"]
    assert invalid, result.spans
    trace = bpe.decode(ids)
    for span in invalid:
        low, high = trace.char_range(span.start, span.end)
        assert not low <= text.index("2. Food") < high  # never the list marker


@pytest.fixture(scope="module")
def server(bpe_dir: Any) -> Any:
    with LiveServer(create_app(Settings(default_tokenizer=str(bpe_dir)))) as live:
        yield live.url


def test_a_lone_rollout_with_a_reference_solution_is_pointed(
    server: str, bpe: LoadedTokenizer
) -> None:
    body = rollout(bpe, "alone", WRONG, 0.0).model_dump(exclude_none=True)
    body.pop("group_id")
    with httpx.Client(base_url=server, timeout=60) as client:
        plain = client.post("/v1/judge", json={"rollout": body})
        referenced = client.post(
            "/v1/judge", json={"rollout": {**body, "reference_solution": REWORDED}}
        )
    assert plain.status_code == 200 and referenced.status_code == 200, referenced.text
    step = "After breakfast she has"
    before = [s["evidence"] for s in plain.json()["spans"] if s["label"] in NEGATIVE]
    after = [s["evidence"] for s in referenced.json()["spans"] if s["label"] in NEGATIVE]
    assert not any(e.startswith(step) for e in before)
    assert after[0].startswith(step)
