"""Real policy samples: G answers per problem from a local causal LM, scored by equivalence.

The audit's traces used to come from a template (devtools/arith_traces.py) that
also wrote the errors; these come from a model, so their errors are its own.

* The prompt is the problem in the model's chat template (as `Aligner.prompt_ids`
  builds it), so the probe and the judges see the prompt the policy saw.
* A group is one `generate` call with ``num_return_sequences = G`` after
  ``torch.manual_seed(seed + k)`` for problem k: a fixed seed gives the same
  tokens on the same torch build, thread count and CPU (fp32 matmul sums in an
  order that depends on them).
* The response is the sampled ids up to (not including) the end-of-turn token;
  ``finish`` says whether it stopped or ran into ``max_new_tokens``.
* The final answer is the last ``\\boxed{}`` when there is one, else the last
  number of the text (a 135M model rarely boxes), except in a trace that ran
  out of tokens without boxing one: it has none. The reward is 1 when the
  equivalence checker says it equals the reference, else 0.
* With a rubric (``judge-service sample --rubric FILE``, rubric_scores.py reads
  the file), the problem's criteria are written into the prompt the policy sees
  by `rubric_prompt`, the one template CoRT's rubric-conditioned row also uses
  (methods/reweight.py). The rollout's ``problem`` is, as everywhere in the API,
  the prompt the policy saw (criteria included) and its ``rubric`` the criteria
  text; `criteria_free` takes the criteria back out for CoRT's counterfactual row,
  so every other reader (CSCR's plain row, the value judge, the probe, the judges)
  conditions on what was sampled from. Without a rubric the rollout carries
  none (``rubric`` null): no criteria were in the prompt, and CoRT, which
  conditions on them, refuses such a rollout rather than measure criteria the
  policy never saw.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge_service.trace.boxed import last_boxed


@dataclass(frozen=True)
class Problem:
    id: str
    question: str
    answer: str


INSTRUCTION = " Put the final answer in \\boxed{}."

# Short arithmetic and word problems with integer answers: a 135M model gets some
# right and some wrong, so groups mix rewards.
PROBLEMS: tuple[Problem, ...] = (
    Problem("add", "What is 23 + 58?", "81"),
    Problem("add-small", "What is 7 + 8?", "15"),
    Problem("div", "What is 144 ÷ 12?", "12"),
    Problem("div-small", "What is 20 ÷ 4?", "5"),
    Problem("mul-small", "What is 6 × 3?", "18"),
    Problem("sub-small", "What is 10 − 4?", "6"),
    Problem("apples", "Tom has 12 apples and gives away 5. How many apples are left?", "7"),
    Problem("eggs", "A box holds 6 eggs. How many eggs are in 4 boxes?", "24"),
    Problem("pens", "Sara has 3 red pens and 4 blue pens. How many pens does she have?", "7"),
    Problem("cats", "A cat has 4 legs. How many legs do 3 cats have?", "12"),
    Problem("birds", "There are 8 birds on a tree and 5 fly away. How many are left?", "3"),
    Problem("money", "Jim had 10 dollars and spent 3. How many dollars does he have now?", "7"),
    Problem("pencils", "A pencil costs 3 dollars. How many dollars do 2 pencils cost?", "6"),
    Problem("train", "A train goes 60 km per hour for 2 hours. How many km does it go?", "120"),
    Problem("double", "What is double 9?", "18"),
    Problem("sum3", "What is 1 + 2 + 3?", "6"),
)

CRITERIA_HEADER = "Your answer will be graded against these criteria:\n"


def criteria_text(texts: Sequence[str]) -> str:
    """The criteria block's body: one numbered line per criterion, in order."""
    return "\n".join(f"{k}. {text}" for k, text in enumerate(texts, 1))


def rubric_prompt(question: str, criteria: str | None) -> str:
    """The user message with the grading criteria: the sampler's prompt and CoRT's
    rubric-conditioned row. No criteria: `question` itself, the criteria-free row."""
    if not (criteria or "").strip():
        return question
    return f"{question}\n\n{CRITERIA_HEADER}{criteria}"


def criteria_free(prompt: str, criteria: str | None) -> str | None:
    """`prompt` without the criteria block `rubric_prompt` writes, or None when `prompt`
    does not end with that block (the rubric was not in the prompt as sampled)."""
    if not (criteria or "").strip():
        return prompt
    block = f"\n\n{CRITERIA_HEADER}{criteria}"
    return prompt[: -len(block)] if prompt.endswith(block) else None


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def extract_answer(text: str) -> str | None:
    """The last ``\\boxed{}`` content, else the last number (commas dropped), else None."""
    boxed = last_boxed(text)
    if boxed is not None and boxed.content.strip():
        return boxed.content.strip()
    numbers = _NUMBER.findall(text)
    return numbers[-1].replace(",", "").rstrip(".") if numbers else None


@dataclass(frozen=True)
class SampleSettings:
    samples: int = 4  # G per problem
    max_new_tokens: int = 128
    temperature: float = 0.7
    top_p: float = 1.0
    seed: int = 0


def prompt_ids(hf_tokenizer: Any, problem: str) -> list[int]:
    from judge_service.probe.alignment import Aligner

    return Aligner(hf_tokenizer, "sampler").prompt_ids(problem)


def sample_group(
    model: Any, hf_tokenizer: Any, problem: str, settings: SampleSettings, seed: int
) -> list[tuple[list[int], str]]:
    """G responses to one problem: (token ids without the end token, "stop" | "length")."""
    import torch

    prompt = prompt_ids(hf_tokenizer, problem)
    stops = {hf_tokenizer.eos_token_id}
    end_turn = hf_tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(end_turn, int) and end_turn != hf_tokenizer.unk_token_id:
        stops.add(end_turn)
    stops.discard(None)
    pad = hf_tokenizer.pad_token_id
    pad = pad if pad is not None else min(stops, default=0)
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = model.generate(
            input_ids=torch.tensor([prompt], dtype=torch.long, device=model.device),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long, device=model.device),
            do_sample=True,
            temperature=settings.temperature,
            top_p=settings.top_p,
            top_k=0,
            max_new_tokens=settings.max_new_tokens,
            num_return_sequences=settings.samples,
            eos_token_id=sorted(stops) or None,
            pad_token_id=pad,
        )
    responses = []
    for row in out[:, len(prompt) :].tolist():
        ids: list[int] = []
        finish = "length"
        for token in row:
            if token in stops:
                finish = "stop"
                break
            ids.append(int(token))
        responses.append((ids, finish))
    return responses


def sample_rollouts(
    model: Any,
    hf_tokenizer: Any,
    tokenizer_name: str,
    problems: Sequence[Problem],
    settings: SampleSettings,
    checker: Any,
    rubrics: Mapping[str, str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Rollout dicts (the wire format), group by group; `checker` is an EquivalenceChecker.
    `rubrics` maps a problem id to its criteria text (`criteria_text`), written into the
    prompt of that problem's samples; a problem it lacks is sampled without criteria."""
    for k, problem in enumerate(problems):
        text = problem.question + INSTRUCTION
        rubric = (rubrics or {}).get(problem.id)
        prompt = rubric_prompt(text, rubric)
        group = sample_group(model, hf_tokenizer, prompt, settings, settings.seed + k)
        extra: dict[str, Any] = {"seed": settings.seed + k, "temperature": settings.temperature}
        if rubric:
            extra["rubric_in_prompt"] = True
        for j, (ids, finish) in enumerate(group):
            yield rollout_record(
                problem,
                prompt,
                hf_tokenizer.decode(ids, skip_special_tokens=False),
                ids,
                finish,
                checker,
                f"{problem.id}-{j}",
                tokenizer_name,
                extra,
                rubric=rubric,
            )


def rollout_record(
    problem: Problem,
    prompt: str,
    response: str,
    ids: list[int],
    finish: str,
    checker: Any,
    rollout_id: str,
    tokenizer: str,
    extra: dict[str, Any],
    rubric: str | None = None,
) -> dict[str, Any]:
    """One sampled response as a rollout, its reward from the equivalence checker.
    `prompt` is the prompt sampled from, `rubric` the criteria written into it (if any)."""
    # A trace cut off by max_new_tokens has no final answer unless it boxed one.
    final = extract_answer(response)
    if finish == "length" and last_boxed(response) is None:
        final = None
    verdict = checker.check(problem.answer, final).verdict if final else "unknown"
    return {
        "id": rollout_id,
        "group_id": problem.id,
        "problem": prompt,
        "response_token_ids": ids,
        "tokenizer": tokenizer,
        "reward": 1.0 if verdict == "equivalent" else 0.0,
        "final_answer": final,
        "reference_answer": problem.answer,
        "rubric": rubric or None,
        "metadata": {
            "source": "judge-service sample",
            "finish": finish,
            "equivalence": verdict,
            **extra,
        },
    }
