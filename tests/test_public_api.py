"""The package root is the public API, light enough for a trainer, and every error lives in
its errors module, drawn in that module's docstring."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import subprocess
import sys

import judge_service_client
import pytest
from judge_service_client.client import errors as client_errors

import judge_service
import sandbox
from judge_service import errors
from sandbox import errors as sandbox_errors

HEAVY = ("transformers", "tokenizers", "torch", "sympy", "fastapi", "pydantic", "httpx")
HEAVY += ("anthropic", "openai", "redis", "uvicorn", "starlette")

BLOCKED_IMPORT = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {HEAVY!r}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
import numpy as np
import judge_service as js
from judge_service.spans import Span
spans = [Span(start=1, end=3, label="invalid", confidence=0.9, evidence="x")]
credit = js.token_credit(
    4, spans, js.DEFAULT_LABEL_SCORES, lam=0.25, kappa=0.25, min_confidence=0.5
)
payload = js.encode(credit.values, "base64-f32")
assert np.allclose(js.decode(payload, 4, "base64-f32"), credit.values)
assert credit.values[1] < 0 and credit.values[0] == 0
print(sorted(m.split(".")[0] for m in sys.modules if m.split(".")[0] in {HEAVY!r}))
"""


def test_the_credit_core_imports_with_numpy_alone() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_IMPORT], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _modules(package: object) -> list[object]:
    found = [package]
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):  # type: ignore[attr-defined]
        if ".__main__" in info.name or ".devtools" in info.name:
            continue
        try:
            found.append(importlib.import_module(info.name))
        except ImportError:  # an optional extra (torch, the trainers) not installed here
            if os.environ.get("JUDGE_REQUIRE_TRAINERS"):
                raise
    return found


@pytest.mark.parametrize(
    ("package", "home", "others"),
    [
        # judge_service.client.errors re-exports the client distribution's, defined there.
        (judge_service, errors, ()),
        (judge_service_client, client_errors, ()),
        (sandbox, sandbox_errors, ()),
    ],
)
def test_every_exception_lives_in_its_errors_module(
    package: object, home: object, others: tuple[str, ...]
) -> None:
    """Public exception classes are defined in the package's errors module (the client
    distribution, which trainers install without the server, keeps its own:
    judge_service_client.client.errors), and each is drawn in that module's docstring;
    private ones (a leading underscore) are control flow inside one module."""
    tree = home.__doc__ or ""
    misplaced, undrawn = [], []
    for module in _modules(package):
        for name, value in vars(module).items():
            if not (inspect.isclass(value) and issubclass(value, BaseException)):
                continue
            if value.__module__ != module.__name__ or name.startswith("_"):  # type: ignore[attr-defined]
                continue
            if value.__module__ in others:
                continue
            if value.__module__ != home.__name__:  # type: ignore[attr-defined]
                misplaced.append(f"{value.__module__}.{name}")
            elif not any(f"{a}{name}{b}" in tree for a in " \n" for b in " \n"):
                undrawn.append(name)
    assert not misplaced
    assert not undrawn


def test_the_root_exports_every_error_of_the_tree() -> None:
    public = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value)
        and issubclass(value, Exception)
        and value.__module__ == errors.__name__
    }
    assert public <= set(judge_service.__all__)
    assert all(getattr(judge_service, name) is getattr(errors, name) for name in public)


def test_a_judge_error_carries_what_the_session_spent() -> None:
    original = errors.StreamCutError("the stream stopped at chunk 3")
    carried = original.with_partial({"turns": 2})
    assert type(carried) is errors.StreamCutError and str(carried) == str(original)
    assert carried.partial == {"turns": 2} and original.partial is None
    assert errors.BudgetError("out of turns", partial=7).partial == 7
