"""Regenerate the eval examples: a ProcessBench-format set and a gold-span set.

    .venv/bin/python examples/make_eval_examples.py

* ``processbench.jsonl``: 20 hand-written records (arithmetic and algebra), 10 with
  every step right (label -1) and 10 with an error: 5 whose first wrong step holds a
  false ``a = b`` arithmetic link, the kind the rules judge checks (it finds 4: it
  skips "starts with 3 × 12 = 38", as a number after "with" may be an operand of
  something larger), and 5 whose error is a wrong method, a sign moved wrongly, a
  lost root or a misread problem, with true arithmetic (it cannot find those; one
  also has a later arithmetic slip, which it then names instead).
* ``gold_spans.jsonl``: 8 rollouts in the bundled tokenizer (``examples/tokenizer``,
  built by ``make_examples.py``) with gold spans by the rubric
  (``prompts/v1/rubric.md``). Each gold span is written here as a
  phrase of the trace and its label; its token range is computed from the phrase
  with the service's own decoder, never typed by hand.

Score a judge on them with ``judge-service eval`` (BENCHMARKS.md has the rules
judge's figures).
"""

from __future__ import annotations

import json
from pathlib import Path

from judge_service.trace.tokenizer import TokenizerCache

HERE = Path(__file__).resolve().parent
TOKENIZER = "examples/tokenizer"

MUL = "What is 23 × 17?"
APPLES = "Sam has 3 boxes of 12 apples and eats 5. How many apples are left?"
AVERAGE = "The average of 4 numbers is 15. Three of them are 10, 12 and 20. What is the fourth?"
PERCENT = "What is 35% of 240?"
RECTANGLE = "A rectangle has perimeter 30 and width 5. What is its area?"

# (id, problem, steps, label): label is the first wrong step, -1 when every step is right.
PROCESSBENCH: list[tuple[str, str, list[str], int]] = [
    # every step right
    (
        "pb-mul",
        MUL,
        [
            "Split 17 into 10 + 7.",
            "23 × 10 = 230 and 23 × 7 = 161.",
            "Add the parts: 230 + 161 = 391.",
            "The answer is \\boxed{391}.",
        ],
        -1,
    ),
    (
        "pb-apples",
        APPLES,
        [
            "Sam starts with 3 × 12 = 36 apples.",
            "After eating 5 he has 36 - 5 = 31 apples.",
            "So \\boxed{31} apples are left.",
        ],
        -1,
    ),
    (
        "pb-linear",
        "Solve 4x - 7 = 21.",
        [
            "Add 7 to both sides: 4x = 21 + 7 = 28.",
            "Divide by 4: x = 28 / 4 = 7.",
            "Check: 4 × 7 - 7 = 21.",
            "So x = \\boxed{7}.",
        ],
        -1,
    ),
    (
        "pb-fractions",
        "Compute 2/3 + 1/6.",
        [
            "Write 2/3 with denominator 6: it is 4/6.",
            "Then 4/6 + 1/6 = 5/6.",
            "The answer is \\boxed{\\frac{5}{6}}.",
        ],
        -1,
    ),
    (
        "pb-percent",
        PERCENT,
        [
            "10% of 240 is 24.",
            "So 30% is 3 × 24 = 72 and 5% is 24 / 2 = 12.",
            "35% is 72 + 12 = 84.",
            "\\boxed{84}",
        ],
        -1,
    ),
    (
        "pb-system",
        "Solve x + y = 10 and x - y = 4.",
        [
            "Adding the two equations gives 2x = 14, so x = 7.",
            "Then y = 10 - 7 = 3.",
            "Check: 7 - 3 = 4.",
            "So (x, y) = \\boxed{(7, 3)}.",
        ],
        -1,
    ),
    (
        "pb-quadratic",
        "Find the positive root of x^2 + x - 12 = 0.",
        [
            "Factor: x^2 + x - 12 = (x + 4)(x - 3).",
            "The roots are x = -4 and x = 3.",
            "Only 3 is positive, and 3^2 + 3 - 12 = 0 checks.",
            "\\boxed{3}",
        ],
        -1,
    ),
    (
        "pb-average",
        AVERAGE,
        [
            "The four numbers sum to 4 × 15 = 60.",
            "The three known ones sum to 10 + 12 + 20 = 42.",
            "The fourth is 60 - 42 = 18.",
            "\\boxed{18}",
        ],
        -1,
    ),
    (
        "pb-rectangle",
        RECTANGLE,
        [
            "Length plus width is half the perimeter: 30 / 2 = 15.",
            "The length is 15 - 5 = 10.",
            "The area is 10 × 5 = 50.",
            "\\boxed{50}",
        ],
        -1,
    ),
    (
        "pb-speed",
        "A train travels 180 km in 2.5 hours. What is its average speed in km/h?",
        [
            "Average speed is distance divided by time.",
            "180 / 2.5 = 72.",
            "The average speed is \\boxed{72} km/h.",
        ],
        -1,
    ),
    # the first wrong step holds a false arithmetic link
    (
        "pb-mul-slip",
        MUL,
        [
            "Split 17 into 10 + 7.",
            "23 × 10 = 230 and 23 × 7 = 151.",
            "Add the parts: 230 + 151 = 381.",
            "The answer is \\boxed{381}.",
        ],
        1,
    ),
    (
        "pb-apples-slip",
        APPLES,
        [
            "Sam starts with 3 × 12 = 38 apples.",
            "After eating 5 he has 38 - 5 = 33 apples.",
            "So \\boxed{33} apples are left.",
        ],
        0,
    ),
    (
        "pb-average-slip",
        AVERAGE,
        [
            "The four numbers sum to 4 × 15 = 60.",
            "The three known ones sum to 10 + 12 + 20 = 42.",
            "The fourth is 60 - 42 = 22.",
            "\\boxed{22}",
        ],
        2,
    ),
    (
        "pb-linear-slip",
        "Solve 5x + 8 = 53.",
        [
            "Subtract 8 from both sides: 5x = 53 - 8 = 45.",
            "Divide by 5: x = 45 / 5 = 8.",
            "So x = \\boxed{8}.",
        ],
        1,
    ),
    (
        "pb-percent-slip",
        PERCENT,
        [
            "10% of 240 is 24.",
            "So 30% is 3 × 24 = 72 and 5% is 24 / 2 = 12.",
            "35% is 72 + 12 = 86.",
            "\\boxed{86}",
        ],
        2,
    ),
    # the error is not a false link: a wrong method, a sign, a lost root, a misread problem
    (
        "pb-linear-sign",
        "Solve 3x + 20 = 5.",
        ["Move 20 over: 3x = 20 - 5 = 15.", "Divide by 3: x = 15 / 3 = 5.", "So x = \\boxed{5}."],
        0,
    ),
    (
        "pb-lost-root",
        "Solve x^2 = 49.",
        [
            "Take the square root of both sides: x = 7.",
            "Check: 7^2 = 49.",
            "The solution is \\boxed{7}.",
        ],
        0,
    ),
    (
        "pb-fraction-method",
        "Compute 1/2 + 1/3.",
        [
            "Add the numerators and add the denominators.",
            "That gives 2 over 5.",
            "So the sum is \\boxed{\\frac{2}{5}}.",
        ],
        0,
    ),
    (
        "pb-misread",
        "A shirt costs 40 dollars and is discounted by 25%. What is the sale price?",
        [
            "The discount is 25% of 40.",
            "So the sale price is 40 × 0.25 = 10 dollars.",
            "\\boxed{10}",
        ],
        1,
    ),
    (
        "pb-rectangle-method",
        RECTANGLE,
        [
            "The length is the perimeter minus the width: 30 - 5 = 25.",
            "The area is 25 × 5 = 120.",
            "\\boxed{120}",
        ],
        0,
    ),
]

P_MUL = "What is 17 × 24?"
P_LIN = "Solve 3x + 20 = 5 for x."

# (id, problem, reward, reference answer, trace, gold spans as (phrase, label))
GOLD: list[tuple[str, str, float, str, str, list[tuple[str, str]]]] = [
    (
        "gs-mul-propagated",
        P_MUL,
        0.0,
        "408",
        "<think>\nFirst 17 × 20 = 350.\nThen 17 × 4 = 68.\nAdding, 350 + 68 = 418.\n"
        "So the total is 418.\n</think>\n\n\\boxed{418}",
        [
            ("17 × 20 = 350", "invalid"),
            ("17 × 4 = 68", "valid_progress"),
            ("350 + 68 = 418", "unsupported"),
            ("So the total is 418.", "unsupported"),
            ("\\boxed{418}", "unsupported"),
        ],
    ),
    (
        "gs-mul-corrected",
        P_MUL,
        1.0,
        "408",
        "<think>\nLet me compute 17 × 24.\n17 × 24 = 418.\n"
        "Hmm, that seems off. Wait, let me recompute: 17 × 20 = 340, 17 × 4 = 68, "
        "and 340 + 68 = 408.\nActually 17 × 24 = 408, not 418.\n</think>\n\n"
        "So the product is \\boxed{408}.",
        [
            ("17 × 24 = 418", "invalid"),
            ("17 × 20 = 340", "valid_progress"),
            ("17 × 4 = 68", "valid_progress"),
            ("340 + 68 = 408", "verified_correction"),
            ("Actually 17 × 24 = 408, not 418.", "verified_correction"),
            ("\\boxed{408}", "valid_progress"),
        ],
    ),
    (
        "gs-linear-sign",
        P_LIN,
        0.0,
        "-5",
        "<think>\nMove 20 over: 3x = 20 - 5 = 15.\nSo x = 15 / 3 = 5.\n"
        "The answer should be 5.\n</think>\n\n\\boxed{5}",
        [
            ("3x = 20 - 5 = 15", "invalid"),
            ("x = 15 / 3 = 5", "unsupported"),
            ("The answer should be 5.", "unsupported"),
            ("\\boxed{5}", "unsupported"),
        ],
    ),
    (
        "gs-repetition",
        P_MUL,
        1.0,
        "408",
        "<think>\n17 × 24 = 408.\nLet me double check that the product is right.\n"
        "17 × 24 = 408.\nLet me double check that the product is right.\n"
        "17 × 24 = 408.\nOK I am confident.\n</think>\n\n\\boxed{408}",
        [
            ("17 × 24 = 408", "valid_progress"),
            (
                "Let me double check that the product is right.\n17 × 24 = 408.\n"
                "Let me double check that the product is right.\n17 × 24 = 408.",
                "unproductive_repetition",
            ),
            ("\\boxed{408}", "valid_progress"),
        ],
    ),
    (
        "gs-linear-correct",
        P_LIN,
        1.0,
        "-5",
        "<think>\nSubtract 20 from both sides: 3x = 5 - 20 = -15.\n"
        "Divide by 3: x = -15 / 3 = -5.\nCheck: 3 × (-5) + 20 = 5. Good.\n</think>\n\n"
        "$x = \\boxed{-5}$",
        [
            ("3x = 5 - 20 = -15", "valid_progress"),
            ("x = -15 / 3 = -5", "valid_progress"),
            ("3 × (-5) + 20 = 5", "valid_progress"),
            ("\\boxed{-5}", "valid_progress"),
        ],
    ),
    (
        "gs-fraction-method",
        "Compute 1/2 + 1/3 + 1/4.",
        0.0,
        "\\frac{13}{12}",
        "<think>\nAdd the numerators and the denominators: "
        "\\frac{1 + 1 + 1}{2 + 3 + 4} = \\frac{3}{9}.\n"
        "Hmm, maybe I should use a common denominator instead.\n"
        "But I will go with \\frac{3}{9} = \\frac{1}{3}.\n</think>\n\n\\boxed{\\frac{1}{3}}",
        [
            ("\\frac{1 + 1 + 1}{2 + 3 + 4} = \\frac{3}{9}", "invalid"),
            ("Hmm, maybe I should use a common denominator instead.", "useful_exploration"),
            ("\\frac{3}{9} = \\frac{1}{3}", "unsupported"),
            ("\\boxed{\\frac{1}{3}}", "unsupported"),
        ],
    ),
    (
        "gs-exploration",
        P_LIN,
        1.0,
        "-5",
        "<think>\nMaybe I can guess: try x = 1: 3 + 20 = 23, too big.\n"
        "Try a negative value, x = -2: -6 + 20 = 14, still too big.\n"
        "Guessing is slow, so solve directly: 3x = -15, x = -5.\n"
        "Check: 3 × (-5) = -15 and -15 + 20 = 5.\n</think>\n\n\\boxed{-5}",
        [
            ("Maybe I can guess: try x = 1: 3 + 20 = 23, too big.", "useful_exploration"),
            ("Try a negative value, x = -2: -6 + 20 = 14, still too big.", "useful_exploration"),
            ("3x = -15, x = -5", "valid_progress"),
            ("3 × (-5) = -15 and -15 + 20 = 5", "valid_progress"),
            ("\\boxed{-5}", "valid_progress"),
        ],
    ),
    (
        "gs-percent-slip",
        "What is 15% of 80?",
        0.0,
        "12",
        "<think>\n15% of 80: 10% is 8 and 5% is 4.\nSo 15% is 8 + 4 = 13.\n"
        "The answer is 13.\n</think>\n\n\\boxed{13}",
        [
            ("10% is 8 and 5% is 4", "valid_progress"),
            ("8 + 4 = 13", "invalid"),
            ("The answer is 13.", "unsupported"),
            ("\\boxed{13}", "unsupported"),
        ],
    ),
]


def processbench_rows() -> list[dict[str, object]]:
    return [
        {
            "id": rid,
            "problem": problem,
            "steps": steps,
            "label": label,
            "final_answer_correct": label == -1,
        }
        for rid, problem, steps, label in PROCESSBENCH
    ]


def gold_rows() -> list[dict[str, object]]:
    tokenizer = TokenizerCache().get(str(HERE / "tokenizer"))
    rows: list[dict[str, object]] = []
    for rid, problem, reward, reference, text, phrases in GOLD:
        ids: list[int] = tokenizer.hf.encode(text, add_special_tokens=False)
        trace = tokenizer.decode(ids)
        assert trace.text == text, f"{rid}: the tokenizer does not round-trip the trace"
        spans = []
        after = 0  # phrases are listed in trace order: each is found after the one before
        for phrase, label in phrases:
            begin = trace.text.find(phrase, after)
            if begin < 0:
                raise ValueError(f"{rid}: {phrase!r} is not in the trace after char {after}")
            after = begin + len(phrase)
            start, end = trace.tokens_for_chars(begin, after)
            spans.append({"start": start, "end": end, "label": label})
        rows.append(
            {
                "id": rid,
                "problem": problem,
                "reward": reward,
                "reference_answer": reference,
                "tokenizer": TOKENIZER,
                "response_token_ids": ids,
                "spans": spans,
            }
        )
    return rows


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def main() -> None:
    _write(HERE / "processbench.jsonl", processbench_rows())
    _write(HERE / "gold_spans.jsonl", gold_rows())
    print(f"wrote {len(PROCESSBENCH)} ProcessBench records and {len(GOLD)} gold-span rollouts")


if __name__ == "__main__":
    main()
