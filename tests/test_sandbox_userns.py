"""The OS layer for a service that does not run as root: a user namespace.

The tests run as root, so they start ``python -m sandbox`` as uid 65534
through ``setpriv``; the sandbox then has no privileges of its own and must
build its namespaces inside a user namespace.
"""

from __future__ import annotations

import ast
import json
import subprocess

import pytest

from tests.sandbox_support import INTERPRETER, NOBODY, sandbox_env

pytestmark = pytest.mark.skipif(
    INTERPRETER is None, reason="needs root, setpriv and a Python that uid 65534 can run"
)


def _run_as_nobody(code: str) -> dict[str, object]:
    assert INTERPRETER is not None
    done = subprocess.run(
        [*NOBODY, INTERPRETER, "-m", "sandbox", "--status", "--timeout", "5"],
        input=code,
        env=sandbox_env(),
        capture_output=True,
        text=True,
        cwd="/",
        timeout=180,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_unprivileged_service_builds_the_os_layer_in_a_user_namespace() -> None:
    probe = "(__import__('os').getuid(), __import__('os').listdir('/'))"
    code = f"import sympy\nsympy.sympify({probe!r})"
    result = _run_as_nobody(code)
    status = result["isolation"]
    assert isinstance(status, dict)
    assert status["mode"] == "userns" and status["isolated"] is True, status
    assert isinstance(result["value"], str)
    uid, listing = ast.literal_eval(result["value"])
    assert uid == 65534
    assert not {"etc", "home", "proc", "root"} & set(listing)


def test_unprivileged_children_hold_no_capabilities() -> None:
    code = "import sympy\nsympy.sympify(\"__import__('os').chroot('/tmp')\")"
    result = _run_as_nobody(code)
    assert result["kind"] == "runtime" and "Operation not permitted" in str(result["message"])
