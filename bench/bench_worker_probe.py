"""What one liveness probe of a worker costs: the exec probe `judge-service worker
--healthcheck` (a Python process per probe: imports the service, opens Redis, reads the
heartbeats) against an HTTP GET of the worker's own /healthz on its metrics port (the
kubelet's httpGet probe: no process in the container).

A real worker (`judge-service worker --metrics-port P`) runs against the Redis at
JUDGE_REDIS_URL (default redis://127.0.0.1:6379/0, a fresh prefix). Measured in one run,
side by side, on that worker:

* exec: N runs of the healthcheck command; wall time, CPU time (user + system, from
  wait4) and peak RSS of each;
* http: M GETs of /healthz; wall time each, and the worker's own CPU time over all of
  them (/proc/<pid>/stat) per probe; the client's side is the kubelet's.

    .venv/bin/python bench/bench_worker_probe.py [--exec-runs 20] [--http-runs 500]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def _exec_probe(command: list[str], env: dict[str, str]) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak RSS MiB, exit code) of one run of the exec probe."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, process.returncode


def _alive(url: str) -> bool:
    """Whether /healthz answers 200 with the worker's liveness (before it existed the
    metrics server answered every path with the metrics)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            body = answer.read()
    except urllib.error.HTTPError:
        return False
    try:
        return json.loads(body).get("alive") is True
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--exec-runs", type=int, default=20)
    parser.add_argument("--http-runs", type=int, default=500)
    args = parser.parse_args(argv)
    cli = shutil.which("judge-service", path=str(Path(sys.executable).parent))
    assert cli, "judge-service is not installed in this environment"
    port = _free_port()
    env = {
        **os.environ,
        "JUDGE_REDIS_URL": os.environ.get("JUDGE_REDIS_URL", "redis://127.0.0.1:6379/0"),
        "JUDGE_REDIS_PREFIX": f"bench-probe-{uuid.uuid4().hex[:8]}",
    }
    worker = subprocess.Popen(
        [cli, "worker", "--metrics-host", "127.0.0.1", "--metrics-port", str(port)],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    healthcheck = [cli, "worker", "--healthcheck"]
    try:
        deadline = time.monotonic() + 60
        while _exec_probe(healthcheck, env)[3] != 0:
            assert time.monotonic() < deadline and worker.poll() is None, "no heartbeat"
            time.sleep(0.5)
        runs = [_exec_probe(healthcheck, env) for _ in range(args.exec_runs)]
        assert all(code == 0 for *_, code in runs)
        url = f"http://127.0.0.1:{port}/healthz"
        http_available = _alive(url)
        walls: list[float] = []
        cpu_before = _cpu_s(worker.pid)
        for _ in range(args.http_runs if http_available else 0):
            started = time.perf_counter()
            assert _alive(url)
            walls.append(time.perf_counter() - started)
        worker_cpu = _cpu_s(worker.pid) - cpu_before
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    report = {
        "exec": {
            "runs": len(runs),
            "wall_ms_median": round(statistics.median(r[0] for r in runs) * 1000, 1),
            "cpu_ms_median": round(statistics.median(r[1] for r in runs) * 1000, 1),
            "peak_rss_mib_median": round(statistics.median(r[2] for r in runs), 1),
        },
        "http": (
            {
                "runs": len(walls),
                "wall_ms_median": round(statistics.median(walls) * 1000, 3),
                "worker_cpu_ms_per_probe": round(worker_cpu / len(walls) * 1000, 3),
            }
            if walls
            else "no /healthz on the metrics port"
        ),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
