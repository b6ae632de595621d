"""Sandbox latency and throughput.

1. A warm sandbox call that uses sympy against a cold ``python -c "import
   sympy; ..."`` subprocess, in the same run and interleaved (cold, warm,
   cold, warm, ...) so that load on the machine hits both alike: medians and
   their ratio. The interleaving also gives each warm call the idle time a
   judge's tool call has between LLM turns; back-to-back warm calls are
   reported separately.
2. The pool's throughput with 2 and 8 concurrent callers.

Run: ``.venv/bin/python bench/bench_sandbox.py [--repeat 30] [--pool 8] [--calls 40]``
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox import Sandbox, probe_isolation

SYMPY_CODE = "import sympy\nx = sympy.Symbol('x')\nprint(sympy.factor(x**2 - 1))"
COLD_COMMAND = [
    sys.executable,
    "-c",
    "import sympy; x = sympy.Symbol('x'); print(sympy.factor(x**2 - 1))",
]
TRIVIAL_CODE = "sum(range(100))"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency(box: Sandbox, repeat: int) -> None:
    warm: list[float] = []
    cold: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(COLD_COMMAND, capture_output=True, text=True, check=True)
        cold.append(time.perf_counter() - started)
        started = time.perf_counter()
        result = box.run(SYMPY_CODE)
        warm.append(time.perf_counter() - started)
        assert result.ok and result.stdout == done.stdout, (result, done.stdout)
    back_to_back: list[float] = []
    trivial: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        box.run(SYMPY_CODE)
        back_to_back.append(time.perf_counter() - started)
    for _ in range(repeat):
        time.sleep(0.05)
        started = time.perf_counter()
        box.run(TRIVIAL_CODE)
        trivial.append(time.perf_counter() - started)

    warm_median, cold_median = statistics.median(warm), statistics.median(cold)
    print(f"## Warm sandbox call vs cold subprocess (sympy factor), n={repeat} each")
    print(f"cold `python -c 'import sympy; ...'`  median {_ms(cold_median)}")
    print(f"warm sandbox call (interleaved)       median {_ms(warm_median)}"
          f"   p90 {_ms(_percentile(warm, 0.9))}")  # fmt: skip
    print(f"ratio cold/warm (medians)             {cold_median / warm_median:8.1f}x")
    print(f"warm sandbox call, back-to-back       median {_ms(statistics.median(back_to_back))}")
    print(f"trivial call (50 ms apart)            median {_ms(statistics.median(trivial))}")


def throughput(box: Sandbox, callers: int, calls_each: int) -> None:
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()

    def caller() -> None:
        for _ in range(calls_each):
            started = time.perf_counter()
            result = box.run(SYMPY_CODE)
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)
                if not result.ok:
                    failures.append(f"{result.kind}: {result.message}")

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    total = callers * calls_each
    print(
        f"{callers} callers x {calls_each} calls: {total / wall:7.1f} calls/s"
        f"   latency p50 {_ms(statistics.median(latencies))}"
        f"   p95 {_ms(_percentile(latencies, 0.95))}   failures {len(failures)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=30, help="latency samples per kind")
    parser.add_argument("--pool", type=int, default=8, help="zygotes in the pool")
    parser.add_argument("--calls", type=int, default=40, help="calls per concurrent caller")
    args = parser.parse_args()

    status = probe_isolation()
    print(f"# bench_sandbox  python {sys.version.split()[0]}  cpus {_cpus()}")
    print(f"isolation: mode={status['mode']} isolated={status['isolated']}")
    with Sandbox(pool_size=args.pool, timeout_s=10.0, memory_mb=256) as box:
        started = time.perf_counter()
        box.start()
        print(f"pool of {args.pool} zygotes started in {time.perf_counter() - started:.2f} s")
        print()
        latency(box, args.repeat)
        print()
        print(f"## Pool throughput (pool of {args.pool}, sympy factor per call)")
        for callers in (2, 8):
            throughput(box, callers, args.calls)
    return 0


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    sys.exit(main())
