"""The public face: `Sandbox` (a pool of Python zygotes) and process-wide defaults."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import subprocess
import sys
import threading
import weakref
from typing import Any, Literal

from sandbox.errors import SandboxUnavailable, ZygoteError
from sandbox.isolation import IsolationReport
from sandbox.pool import Envelope, PoolOwner, ZygotePool, zygote_env
from sandbox.result import RunResult

logger = logging.getLogger("sandbox")

IsolationSetting = Literal["auto", "require", "off"]
_HANDLER = "sandbox.execute"
# Past the child's own timer, the time it may take to report before it is killed.
_KILL_GRACE_S = 1.0


class Sandbox(PoolOwner):
    """Runs untrusted Python in confined children forked from warm zygotes.

    `timeout_s` and `memory_mb` are the defaults for `run`; `memory_mb` is what
    a call may allocate on top of the zygote's own footprint. With
    ``isolation="auto"`` a machine without namespaces still runs code (under
    RestrictedPython, rlimits and, as root, uid 65534) but refuses sympy;
    ``"require"`` refuses to start there; ``"off"`` skips the OS layer.
    `max_processes` is the RLIMIT_NPROC of the sandbox uid: 1 (the default)
    means code cannot fork at all, even through a sympy escape.
    """

    def __init__(
        self,
        *,
        pool_size: int = 2,
        timeout_s: float = 5.0,
        memory_mb: int = 256,
        max_output_chars: int = 64_000,
        max_value_chars: int = 16_000,
        max_source_chars: int = 100_000,
        isolation: IsolationSetting = "auto",
        startup_timeout_s: float = 120.0,
        max_processes: int = 1,
    ) -> None:
        self.timeout_s = timeout_s
        self.max_processes = max_processes
        self.memory_mb = memory_mb
        self.max_output_chars = max_output_chars
        self.max_value_chars = max_value_chars
        self.max_source_chars = max_source_chars
        self.isolation = isolation
        pool = ZygotePool(
            _HANDLER,
            size=pool_size,
            isolate=isolation != "off",
            startup_timeout_s=startup_timeout_s,
        )
        super().__init__(pool, pool_size, "sandbox")
        self._start_lock = threading.Lock()
        self._report: IsolationReport | None = None

    def start(self) -> IsolationReport:
        """Start the zygotes now (otherwise the first call does); returns the isolation."""
        with self._start_lock:
            if self._report is not None:
                return self._report
            report = self.pool.start()
            if not report.holds:
                if self.isolation == "require":
                    self.pool.close()
                    raise SandboxUnavailable(f"sandbox OS isolation does not hold: {report.reason}")
                logger.warning(
                    "sandbox: OS isolation does not hold (%s); run_python runs under "
                    "RestrictedPython and rlimits only, and refuses sympy",
                    report.reason,
                )
            self._report = report
            _remember(self)
            return report

    def run(
        self, code: str, *, timeout_s: float | None = None, memory_mb: int | None = None
    ) -> RunResult:
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        memory_mb = self.memory_mb if memory_mb is None else memory_mb
        if not isinstance(code, str):
            return RunResult.failure("internal", "code must be a string")
        if not (timeout_s > 0 and memory_mb >= 16):
            return RunResult.failure("internal", "timeout_s must be > 0 and memory_mb >= 16")
        if len(code) > self.max_source_chars:
            return RunResult.failure(
                "forbidden",
                f"the code is {len(code)} characters long; the limit is {self.max_source_chars}",
            )
        try:
            self.start()
        except (ZygoteError, SandboxUnavailable) as exc:
            return RunResult.failure("internal", f"the sandbox is unavailable: {exc}")
        request = {
            "payload": {
                "code": code,
                "timeout_s": timeout_s,
                "max_output_chars": self.max_output_chars,
                "max_value_chars": self.max_value_chars,
            },
            "memory_bytes": memory_mb << 20,
            "cpu_s": math.ceil(timeout_s) + 1,
            "processes": self.max_processes,
        }
        envelope = self.pool.call(request, timeout_s + _KILL_GRACE_S)
        return _to_result(envelope, timeout_s)

    async def run_async(
        self, code: str, *, timeout_s: float | None = None, memory_mb: int | None = None
    ) -> RunResult:
        """`run` on a worker thread, so the event loop keeps serving meanwhile."""
        call = functools.partial(self.run, code, timeout_s=timeout_s, memory_mb=memory_mb)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def isolation_status(self) -> dict[str, Any]:
        report = self._report or self.pool.report
        if report is None:
            return probe_isolation()
        return _status(report, source="pool", pool=self.pool)


def _to_result(envelope: Envelope, timeout_s: float) -> RunResult:
    if envelope.status == "done" and envelope.result is not None:
        return RunResult.from_dict(envelope.result)
    extra: dict[str, Any] = {"duration_ms": (envelope.wall_s or 0.0) * 1000}
    if envelope.status == "timeout":
        message = f"the code ran past its {timeout_s:g} s time limit and was killed"
        return RunResult.failure("timeout", message, **extra)
    if envelope.status == "crashed":
        if envelope.signal == "SIGKILL":
            return RunResult.failure(
                "memory", "the code was killed, most likely out of memory", **extra
            )
        message = f"the sandboxed process crashed ({envelope.signal})"
        return RunResult.failure("runtime", message, **extra)
    return RunResult.failure("internal", f"sandbox failure ({envelope.status}): {envelope.message}")


# -- process-wide defaults -----------------------------------------------------

_default: Sandbox | None = None
_default_lock = threading.Lock()
_latest: weakref.ref[Sandbox] | None = None
_probe_cache: dict[str, Any] | None = None


def _remember(sandbox: Sandbox) -> None:
    global _latest
    _latest = weakref.ref(sandbox)


def default_sandbox() -> Sandbox:
    """The process-wide sandbox `run` uses (created with defaults on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Sandbox()
        return _default


def set_default_sandbox(sandbox: Sandbox) -> None:
    global _default
    with _default_lock:
        _default = sandbox


def run(code: str, *, timeout_s: float = 5.0, memory_mb: int = 256) -> RunResult:
    """Run `code` in the default sandbox."""
    return default_sandbox().run(code, timeout_s=timeout_s, memory_mb=memory_mb)


async def run_async(code: str, *, timeout_s: float = 5.0, memory_mb: int = 256) -> RunResult:
    return await default_sandbox().run_async(code, timeout_s=timeout_s, memory_mb=memory_mb)


def _status(report: IsolationReport, *, source: str, pool: ZygotePool | None) -> dict[str, Any]:
    status = {**report.to_dict(), "sympy": report.holds, "source": source}
    if pool is not None:
        status.update(
            {"pool_size": pool.size, "zygotes_alive": len(pool.pids()), "replaced": pool.replaced}
        )
    return status


def probe_isolation() -> dict[str, Any]:
    """Whether the OS layer can be built here, from a short-lived probe (cached)."""
    global _probe_cache
    if _probe_cache is None:
        command = [sys.executable, "-s", "-m", "sandbox.zygote", "--probe"]
        try:
            done = subprocess.run(
                command, capture_output=True, env=zygote_env(), timeout=60, check=True, cwd="/"
            )
            report = IsolationReport.from_dict(json.loads(done.stdout))
        except (subprocess.SubprocessError, OSError, ValueError) as exc:
            report = IsolationReport(mode="none", reason=f"the isolation probe failed: {exc}")
        _probe_cache = _status(report, source="probe", pool=None)
    return dict(_probe_cache)


def isolation_status() -> dict[str, Any]:
    """For /readyz: whether the OS layer holds (and so sympy is offered), and why not.

    Reports the most recently started sandbox's zygotes; before any has
    started, a cached probe of what this machine allows.
    """
    latest = _latest() if _latest is not None else None
    if latest is not None:
        return latest.isolation_status()
    return probe_isolation()
