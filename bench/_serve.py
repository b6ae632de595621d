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
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def served(
    env: dict[str, str], source: str | None = None, prefix: list[str] | None = None
) -> Iterator[str]:
    """The base URL of a server started with `env`; ``source`` serves the judge_service
    package of another checkout (e.g. a ``git worktree`` of an older commit); ``prefix``
    runs the command under another (e.g. ``py-spy record -o OUT --``)."""
    port = free_port()
    if source:  # (-m puts the working directory first on sys.path, then PYTHONPATH)
        env = {**env, "PYTHONPATH": source}
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
        yield url
    finally:
        # py-spy writes its profile on SIGINT (and then ends the server it started)
        process.send_signal(signal.SIGINT if prefix else signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
