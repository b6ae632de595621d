"""The sandbox on a read-only container root, as the Helm chart runs it
(``readOnlyRootFilesystem: true``, /tmp an ``emptyDir``, a non-root uid).

A child process leaves the host's mount namespace, remounts every filesystem read-only
(as the kubelet makes a container's root), mounts a tmpfs on /tmp (the chart's emptyDir,
the only writable path), drops to uid 10001 (the image's user, no capabilities) and runs
the real sandbox, ``python -m sandbox --isolation require``: its zygote must still build
its namespaces and its own read-only root, and run code with sympy. The API itself then
starts, is ready and judges on such a root. Needs root (to make the mounts) and a Python
a non-root uid can run (tests/sandbox_support.py finds it); elsewhere it skips.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import EXAMPLES
from tests.redis_support import free_port, shared_redis, stop, wait_http
from tests.sandbox_support import INTERPRETER, sandbox_env

UID = 10001  # docker/Dockerfile's `judge`, the chart's runAsUser
pytestmark = pytest.mark.skipif(
    INTERPRETER is None, reason="needs root, setpriv and a Python a non-root uid can run"
)

# Runs in the child, as root, before it becomes uid 10001 and execs its arguments.
READ_ONLY_ROOT = """
import errno, os, sys
from sandbox.isolation import (
    CLONE_NEWNS, MS_BIND, MS_NODEV, MS_NOSUID, MS_PRIVATE, MS_RDONLY, MS_REC, MS_REMOUNT,
    _inherited_flags, mount, unshare,
)
unshare(CLONE_NEWNS)
mount(None, "/", None, MS_REC | MS_PRIVATE, None)
points = {line.split()[4] for line in open("/proc/self/mountinfo")}
kernel = ("/proc", "/sys", "/dev")  # the runtime's own mounts, as in a container
for point in sorted(points, key=len):
    if point.startswith(kernel) or not os.path.isdir(point):
        continue
    try:
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | _inherited_flags(point)
        mount(None, point, None, flags, None)
    except OSError as exc:
        sys.exit(f"cannot remount {point} read-only: {exc}")
mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
for probe in ("/", sys.prefix, os.getcwd()):
    try:
        open(os.path.join(probe, ".write-probe"), "w").close()
        sys.exit(f"{probe} is writable")
    except OSError as exc:
        assert exc.errno in (errno.EROFS, errno.EACCES), exc
open("/tmp/.write-probe", "w").close()  # the emptyDir is
if {uid}:
    os.setgroups([])
    os.setresgid({uid}, {uid}, {uid})
    os.setresuid({uid}, {uid}, {uid})
os.execv(sys.argv[1], sys.argv[1:])
"""


def _read_only(uid: int = UID) -> list[str]:
    """The command prefix that runs a command on a read-only root as `uid`."""
    python = INTERPRETER if uid else sys.executable
    assert python is not None
    return [python, "-c", READ_ONLY_ROOT.replace("{uid}", str(uid))]


def _run(isolation: str, code: str) -> dict[str, Any]:
    assert INTERPRETER is not None
    sandbox = [INTERPRETER, "-m", "sandbox", "--status", "--isolation", isolation]
    done = subprocess.run(
        [*_read_only(), *sandbox, "--timeout", "10"],
        input=code,
        env={**sandbox_env(), "PYTHONDONTWRITEBYTECODE": "1"},
        cwd="/",
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# sympify evaluates its string as Python: the escape from RestrictedPython that the OS layer
# must contain (tests/test_sandbox_userns.py uses it too). Here it writes 3 bytes to a file
# of the sandbox's own scratch space.
ESCAPE = (
    "(__import__('os').getuid(), "
    "__import__('os').write(__import__('tempfile').mkstemp()[0], b'abc'))"
)


def test_sandbox_runs_isolated_with_a_read_only_root_and_tmp_the_only_writable_path() -> None:
    code = f"import sympy\n(str(sympy.sympify({ESCAPE!r})), str(sympy.factor('x**2 - 1')))"
    result = _run("require", code)
    # Not root: the zygote builds its namespaces in a user namespace, as in the pod.
    status = result["isolation"]
    assert status["mode"] == "userns" and status["isolated"] is True, status
    escaped, factored = ast.literal_eval(result["value"])
    assert factored == "(x - 1)*(x + 1)"
    uid, written = ast.literal_eval(escaped)
    assert uid != 0 and written == 3


def test_sandbox_without_its_os_layer_runs_on_a_read_only_root_too() -> None:
    # sandbox.capSysAdmin=false: no namespaces; the code still runs, confined by rlimits.
    result = _run("off", "sum(range(10))")
    assert result["value"] == "45" and result["isolation"]["isolated"] is False


@pytest.mark.redis
@pytest.mark.slow
def test_the_api_starts_and_judges_on_a_read_only_root(
    tmp_path: Path, example_rollouts: list[dict[str, Any]]
) -> None:
    """The whole service, not only its sandbox: `judge-service serve` on the read-only
    root, HOME's cache on the /tmp tmpfs (the chart's cache emptyDir), ready with the
    sandbox's OS layer required, judging the bundled rollouts. It stays root here (no
    filesystem write is allowed to root either on a read-only mount): this environment's
    own interpreter, whose packages a non-root uid may not reach; the tests above run the
    sandbox as uid 10001."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with shared_redis() as (redis_url, prefix):
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("JUDGE_")},
            "PYTHONDONTWRITEBYTECODE": "1",
            "HOME": "/tmp/home",
            "JUDGE_REDIS_URL": redis_url,
            "JUDGE_REDIS_PREFIX": prefix,
            "JUDGE_SANDBOX_ISOLATION": "require",
            "JUDGE_DEFAULT_TOKENIZER": str(EXAMPLES / "tokenizer"),
            "JUDGE_TOKENIZER_ROOTS": str(EXAMPLES),
        }
        serve = ["-m", "judge_service", "serve", "--host", "127.0.0.1", "--port", str(port)]
        with (tmp_path / "api.log").open("wb") as log:
            api = subprocess.Popen(
                [*_read_only(0), sys.executable, *serve], env=env, stdout=log, stderr=log, cwd="/"
            )
        try:
            wait_http(url, timeout=60)
            ready = httpx.get(f"{url}/readyz", timeout=30)
            assert ready.status_code == 200, ready.text
            assert ready.json()["checks"]["sandbox"]["isolated"] is True
            fields = ("id", "response_token_ids", "reward", "reference_answer")
            rollouts = [{k: row[k] for k in fields if k in row} for row in example_rollouts]
            answer = httpx.post(f"{url}/v1/judge/batch", json={"rollouts": rollouts}, timeout=60)
            assert answer.status_code == 200, answer.text
            assert [r["status"] for r in answer.json()["results"]] == ["ok"] * len(rollouts)
        finally:
            stop(api)
            log_text = (tmp_path / "api.log").read_text(errors="replace")
            assert "Read-only file system" not in log_text, log_text[-3000:]
