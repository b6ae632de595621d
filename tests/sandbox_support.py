"""A Python interpreter a non-root uid can run with this checkout's packages: the sandbox
tests that drop root (tests/test_sandbox_userns.py, tests/test_sandbox_readonly_root.py)
start the sandbox with it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def site_packages() -> list[str]:
    return [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]


def sandbox_env() -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join([str(REPO), *site_packages()]),
    }


def interpreter_for_nobody() -> str | None:
    """A Python of this ABI that uid 65534 can run with our site-packages, if any."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [os.path.realpath(sys.executable), f"/usr/bin/python{version}"]
    # It must also be able to start itself again (the zygotes are its children).
    probe = (
        "import subprocess, sys, RestrictedPython, sympy, sandbox\n"
        "subprocess.run([sys.executable, '-c', 'import sympy'], check=True)"
    )
    for candidate in dict.fromkeys(candidates):
        if not os.path.exists(candidate):
            continue
        done = subprocess.run(
            [*NOBODY, candidate, "-c", probe], env=sandbox_env(), capture_output=True, timeout=120
        )
        if done.returncode == 0:
            return candidate
    return None


INTERPRETER = interpreter_for_nobody()
