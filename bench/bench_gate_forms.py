"""The audit gate's leak count (issue 43): traces that write their answer early, in every
form the project's reader of written numbers knows, then reason on and close with an answer
block. A leak is a trace the gate reads *after* that early answer (the probe would read an
answer already on the page). Counts, not timings, so two checkouts compare from two runs:

    .venv/bin/python bench/bench_gate_forms.py
    PYTHONPATH=/tmp/before .venv/bin/python bench/bench_gate_forms.py   # another checkout

It also counts, on the bundled SmolLM2 samples, what the gate leaves out: traces cut at
token 0 and traces cut far before their answer block.
"""

from __future__ import annotations

import json
from pathlib import Path

from judge_service.probe.answer_cut import char_to_cut, final_answer_start, gate_start
from judge_service.trace import last_boxed

ROOT = Path(__file__).resolve().parent.parent
SAMPLED = ROOT / "examples" / "sampled"

# (answer as the verifier states it, the same answer as a trace may first write it)
FORMS = [
    ("105", "105"),
    ("105", "one hundred and five"),
    ("105", "one hundred five"),
    ("21", "twenty-one"),
    ("21", "twenty one"),
    ("3400", "three thousand four hundred"),
    ("2000000", "two million"),
    ("1000", "1,000"),
    ("1000", "1{,}000"),
    ("32349", "32,\\!349"),
    ("1000", "1\u2009000"),
    ("0.5", "\\frac12"),
    ("0.75", "\\tfrac34"),
    ("3/4", "\\dfrac{3}{4}"),
    ("\\frac{1}{2}", "1/2"),
    ("0.5", "\\frac1{2}"),
    ("7", "seven"),
    ("18", "\uff11\uff18"),  # fullwidth
    ("18", "\u0661\u0668"),  # Arabic-Indic
]
TEMPLATE = (
    "Let me work it out. The count comes to {early} here, I think.\n"
    "Checking the parts again: the first part and the second part agree.\n"
    "So the final answer is \\boxed{{{answer}}}."
)


def generated() -> tuple[int, int, list[str]]:
    leaks: list[str] = []
    for answer, early in FORMS:
        text = TEMPLATE.format(early=early, answer=answer)
        at = text.index(early)
        cut = gate_start(text, answer, None)
        if cut is None or cut[0] > at:
            leaks.append(f"{early!r} for {answer!r}")
    return len(FORMS), len(leaks), leaks


def bundled() -> tuple[int, int, int]:
    """The bundled SmolLM2 samples (examples/sampled, 64 + 128 rollouts) cut as the probe
    cuts them: finished traces, those cut at token 0, those cut before a quarter of the
    way to their answer block (`probe.audit.far_before_answer`)."""
    from judge_service.trace.tokenizer import TokenizerCache

    tokenizer = TokenizerCache().get(str(SAMPLED / "tokenizer"))
    finished = zero = far = 0
    for name in ("rollouts.jsonl", "rollouts-g16.jsonl"):
        for line in (SAMPLED / name).open():
            row = json.loads(line)
            trace = tokenizer.decode(row["response_token_ids"])
            boxed = last_boxed(trace.text)
            final = row.get("final_answer") or (boxed.content if boxed else None)
            block = final_answer_start(trace.text, final) if final else None
            first = gate_start(trace.text, final, row.get("reference_answer")) if final else None
            if block is None or first is None:
                continue
            finished += 1
            gate_cut = char_to_cut(trace.offsets, first[0])
            block_cut = char_to_cut(trace.offsets, block[0])
            zero += gate_cut == 0
            far += 0 < gate_cut < 0.25 * block_cut
    return finished, zero, far


def main() -> None:
    total, leaked, which = generated()
    print(f"generated traces: {total}, leaks: {leaked}")
    for item in which:
        print(f"  leak: {item}")
    finished, zero, far = bundled()
    print(
        f"bundled samples: {finished} finished traces, gate cut at token 0: {zero}, "
        f"cut before a quarter of the way to the answer block: {far}"
    )


if __name__ == "__main__":
    main()
