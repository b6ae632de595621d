"""The processes of each host, started inside its namespace: Redis, haproxy, the API and
the workers (the checkout's own `.venv/bin/judge-service`)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.multihost.netns import Host

ROOT = Path(__file__).resolve().parents[2]
JUDGE = ROOT / ".venv" / "bin" / "judge-service"
API_PORT = 8000
REDIS_PORT = 6379
HAPROXY_PORT = 8080


@dataclass
class Proc:
    host: Host
    role: str
    popen: subprocess.Popen[bytes]
    log: Path


@dataclass
class Fleet:
    """Every process this run started, with its log; all are SIGKILLed by `stop`."""

    logs: Path
    procs: list[Proc] = field(default_factory=list)

    def start(self, host: Host, role: str, argv: list[str], env: dict[str, str]) -> Proc:
        log = self.logs / f"{host.name}-{role}.log"
        # setpriv --pdeathsig: should this driver die without its cleanup (SIGKILL, OOM),
        # the kernel kills what it started instead of leaving servers bound in a namespace.
        # (The signal follows the thread that started the child: start from the main one.)
        command = ["setpriv", "--pdeathsig", "KILL", "--", "ip", "netns", "exec", host.name]
        with log.open("ab") as out:
            popen = subprocess.Popen(
                [*command, *argv], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        proc = Proc(host, role, popen, log)
        self.procs.append(proc)
        return proc

    def on(self, host: Host) -> list[Proc]:
        return [p for p in self.procs if p.host is host]

    def kill(self, procs: list[Proc]) -> None:
        for proc in procs:
            if proc.popen.poll() is None:
                os.kill(proc.popen.pid, signal.SIGKILL)
        for proc in procs:
            proc.popen.wait(timeout=10)

    def stop(self) -> None:
        self.kill(self.procs)

    def died(self, procs: list[Proc]) -> list[str]:
        """Processes that exited although nobody stopped them, with their log's tail."""
        return [f"{p.host.name} {p.role}: exit {p.popen.returncode}: {tail(p.log)}"
                for p in procs if p.popen.poll() is not None]  # fmt: skip


def tail(path: Path, lines: int = 8) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def service_env(redis_url: str, prefix: str, extra: dict[str, str]) -> dict[str, str]:
    """The environment of an API or worker: this one's without its JUDGE_* settings (a
    setting exported in the caller's shell must not change what is measured), plus the
    deployment's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_")}
    env.update(
        JUDGE_REDIS_URL=redis_url,
        JUDGE_REDIS_PREFIX=prefix,
        JUDGE_DEFAULT_TOKENIZER="examples/tokenizer",
        JUDGE_TOKENIZER_ROOTS="examples",
        JUDGE_INPROCESS_WORKER="off",  # the workers judge; the API only answers
    )
    env.update(extra)
    return env


def redis_argv(host: Host) -> list[str]:
    options = {"bind": host.address, "port": str(REDIS_PORT), "save": "", "appendonly": "no",
               "protected-mode": "no", "maxmemory-policy": "noeviction"}  # fmt: skip
    return ["redis-server", *(x for k, v in options.items() for x in (f"--{k}", v))]


def api_argv(host: Host) -> list[str]:
    return [str(JUDGE), "serve", "--host", host.address, "--port", str(API_PORT),
            "--log-level", "warning"]  # fmt: skip


def worker_argv(name: str) -> list[str]:
    return [str(JUDGE), "worker", "--name", name, "--log-level", "warning"]


def wait_for(check: Callable[[], object], timeout_s: float, what: str, every: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every)
