"""Run untrusted Python: RestrictedPython as a filter, the OS as the boundary.

Usable on its own, without the judge service::

    import sandbox
    result = sandbox.run("import math\nmath.factorial(20)", timeout_s=2, memory_mb=128)
    result.ok, result.value  # (True, '2432902008176640000')

Calls are served by warm zygote processes that fork one confined child per
call (see `sandbox.zygote` and `sandbox.isolation`). ``python -m sandbox``
reads code on stdin and prints the result as JSON.
"""

from sandbox.errors import SandboxUnavailable, ZygoteError
from sandbox.isolation import IsolationReport
from sandbox.policy import ALLOWED_MODULES, ISOLATED_ONLY_MODULES
from sandbox.pool import Envelope, ZygotePool
from sandbox.result import ERROR_KINDS, ErrorKind, RunResult
from sandbox.runner import (
    Sandbox,
    default_sandbox,
    isolation_status,
    probe_isolation,
    run,
    run_async,
    set_default_sandbox,
)

__all__ = [
    "ALLOWED_MODULES",
    "ERROR_KINDS",
    "ISOLATED_ONLY_MODULES",
    "Envelope",
    "ErrorKind",
    "IsolationReport",
    "RunResult",
    "Sandbox",
    "SandboxUnavailable",
    "ZygoteError",
    "ZygotePool",
    "default_sandbox",
    "isolation_status",
    "probe_isolation",
    "run",
    "run_async",
    "set_default_sandbox",
]
