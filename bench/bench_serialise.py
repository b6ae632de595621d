"""A dense 32k-token result from numpy arrays to JSON bytes: the path before issue 16
(a Python loop of float(), validating the lists against the PerToken union, pydantic's
model_dump_json) against today's (ndarray.tolist(), no re-validation, orjson).

    .venv/bin/python bench/bench_serialise.py [--tokens 32768] [--repeats 25]
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import median_ms

from judge_service.schemas import Result
from judge_service.wire_json import dump_json


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=32_768)
    parser.add_argument("--repeats", type=int, default=25)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    credit = rng.standard_normal(args.tokens) * 0.01
    advantage = credit + 0.25

    def before() -> bytes:
        lists = {n: [float(v) for v in a.tolist()] for n, a in (("c", credit), ("a", advantage))}
        result = Result(
            id="r", status="ok", num_tokens=args.tokens, credit=lists["c"], advantage=lists["a"]
        )
        return result.model_dump_json(exclude_none=True).encode()

    def after() -> bytes:
        result = Result(id="r", status="ok", num_tokens=args.tokens)
        result.credit, result.advantage = credit.tolist(), advantage.tolist()
        return dump_json(result)

    assert before() == after() or np.array_equal(
        np.asarray(Result.model_validate_json(before()).credit),
        np.asarray(Result.model_validate_json(after()).credit),
    )
    old, new = median_ms(before, args.repeats), median_ms(after, args.repeats)
    print(f"{args.tokens} tokens, credit + advantage, dense, median of {args.repeats}")
    print(f"before (float loop, validation, model_dump_json)  {old:7.2f} ms")
    print(f"after  (tolist, no re-validation, orjson)           {new:7.2f} ms")
    print(f"speed-up                                            {old / new:7.2f}x")


if __name__ == "__main__":
    main()
