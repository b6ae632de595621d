"""Extract math-verify's own test cases into cases.jsonl (see README.md here).

    python examples/math_verify_suite/extract.py SRC/tests -o examples/math_verify_suite/cases.jsonl

SRC is the math-verify source release the service depends on (the sdist,
``pip download --no-deps --no-binary :all: math-verify==0.9.0``). Every
``pytest.mark.parametrize`` case with a gold, a prediction and an expected verdict
is kept, with the configuration its test passes to ``parse``/``verify``; a case
whose configuration differs from the library's defaults is marked so.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
from pathlib import Path
from typing import Any

# compare_strings(gold, pred, match_types=["latex", "expr"], precision=6, strict=True,
# allow_set_relation_comp=False) in tests/test_all.py; verify's own defaults are the same,
# except that compare_strings reads boxed answers first (boxed_match_priority=0).
_DEFAULTS: dict[str, Any] = {
    "match_types": ["latex", "expr"],
    "precision": 6,
    "strict": True,
    "allow_set_relation_comp": False,
}
_ARG_NAMES = {"result": "expected"}


def _value(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:  # f"{math.sqrt(17):.15f}": evaluated with math alone
        return eval(compile(ast.Expression(node), "<case>", "eval"), {"math": math})


def _call_config(function: ast.FunctionDef) -> tuple[bool, dict[str, Any]]:
    """Whether the test goes through compare_strings, and the constant keywords it passes
    (a keyword that names a parameter is read per case)."""
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "compare_strings":
            config: dict[str, Any] = {}
            for keyword in node.keywords:
                if isinstance(keyword.value, ast.Name):
                    config[str(keyword.arg)] = ("param", keyword.value.id)
                else:
                    config[str(keyword.arg)] = ast.literal_eval(keyword.value)
            return True, config
    return False, {}


def _cases(path: Path) -> list[dict[str, Any]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = []
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef):
            continue
        for decorator in function.decorator_list:
            if not (isinstance(decorator, ast.Call) and "parametrize" in ast.unparse(decorator)):
                continue
            names = [n.strip() for n in ast.literal_eval(decorator.args[0]).split(",")]
            names = [_ARG_NAMES.get(n, n) for n in names]
            if not {"gold", "pred", "expected"} <= set(names):
                continue
            through_compare, config = _call_config(function)
            assert isinstance(decorator.args[1], ast.List)
            for index, row in enumerate(decorator.args[1].elts):
                values = dict(zip(names, _value(row), strict=True))
                case_config = dict(_DEFAULTS)
                for key, value in config.items():
                    is_param = isinstance(value, tuple) and value[0] == "param"
                    case_config[key] = values[value[1]] if is_param else value
                for key in ("strict", "allow_set_relation_comp", "precision"):
                    if key in values:
                        case_config[key] = values[key]
                found.append(
                    {
                        "id": f"{path.name}::{function.name}[{index}]",
                        "gold": values["gold"],
                        "pred": values["pred"],
                        "expected": int(values["expected"]),
                        "boxed_first": through_compare,
                        "config": case_config,
                        "defaults": case_config == _DEFAULTS,
                    }
                )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tests", type=Path, help="the tests/ folder of math-verify's source")
    parser.add_argument("-o", "--out", type=Path, required=True)
    args = parser.parse_args()
    cases = [case for path in sorted(args.tests.glob("test_*.py")) for case in _cases(path)]
    with args.out.open("w", encoding="utf-8") as out:
        for case in cases:
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    print(f"{len(cases)} cases, {sum(c['defaults'] for c in cases)} with default configuration")


if __name__ == "__main__":
    main()
