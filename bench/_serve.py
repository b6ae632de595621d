"""`judge-service serve` as a subprocess for the benches that measure a real server over
loopback: a free port, the caller's environment on top of ours, ready once /healthz
answers, terminated on exit. (The benches run as scripts, so this directory is on
sys.path: ``from _serve import free_port, served``.)"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

# The server process of each URL `served` yields (without a prefix: the server itself),
# for benches that read its CPU time from /proc.
PIDS: dict[str, int] = {}


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process `pid`, all its threads, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def missing_dependencies(source: str, optional: Sequence[str]) -> list[str]:
    """Of `optional` (installed here), those the checkout at `source` does not depend on:
    its server must run without them, as it did in its own environment."""
    declared = Path(source, "pyproject.toml").read_text(encoding="utf-8")
    return [name for name in optional if f'"{name}' not in declared]


def source_env(env: dict[str, str], source: str | None, without: Sequence[str]) -> dict[str, str]:
    """`env` for a server of the checkout at `source` (None: this one) that must not import
    the modules `without` (see `served`)."""
    paths = [source] if source else []  # (-m puts the cwd first on sys.path, then these)
    if without:
        shim = Path(tempfile.mkdtemp(prefix="serve-without-"))
        (shim / "sitecustomize.py").write_text(
            f"import sys\nfor name in {list(without)!r}:\n    sys.modules[name] = None\n",
            encoding="utf-8",
        )
        paths.append(str(shim))
    return {**env, "PYTHONPATH": os.pathsep.join(paths)} if paths else env


def wait_ready(url: str, timeout_s: float = 60) -> None:
    """Returns once /readyz answers 200, as a load balancer routes to a server: /readyz
    waits for the start-up import of transformers and what follows it, seconds of CPU in a
    thread that takes the GIL from the event loop, so a bench that starts at /healthz
    measures the server's start as much as what it asks."""
    deadline = time.monotonic() + timeout_s
    while httpx.get(url + "/readyz", timeout=timeout_s).status_code != 200:
        if time.monotonic() > deadline:
            raise RuntimeError("the server did not become ready")
        time.sleep(0.2)


@contextmanager
def served(
    env: dict[str, str],
    source: str | None = None,
    prefix: list[str] | None = None,
    without: Sequence[str] = (),
) -> Iterator[str]:
    """The base URL of a server started with `env`; ``source`` serves the judge_service
    package of another checkout (e.g. a ``git worktree`` of an older commit); ``prefix``
    runs the command under another (e.g. ``py-spy record -o OUT --``); ``without`` names
    modules the server must not import (a ``sitecustomize`` makes importing them fail, so
    that uvicorn's "auto" choices fall back as they did before they were dependencies)."""
    port = free_port()
    env = source_env(env, source, without)
    process = subprocess.Popen(
        [
            *(prefix or []),
            *[sys.executable, "-m", "judge_service.cli.main", "serve", "--port", str(port)],
        ],
        env={**os.environ, **env},
        cwd=source,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("the server did not start")
            time.sleep(0.2)
        if not prefix:
            PIDS[url] = process.pid
        yield url
    finally:
        PIDS.pop(url, None)
        # py-spy writes its profile on SIGINT (and then ends the server it started)
        process.send_signal(signal.SIGINT if prefix else signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
