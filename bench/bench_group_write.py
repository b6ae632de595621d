"""Benchmark: how long a groupwise job's write of a maximal group holds Redis, per call.

Redis runs one command at a time, so a call that copies a group's results stops every
other client (workers, the API, heartbeats) while it runs. A maximal group is
JUDGE_MAX_GROUP_SIZE (16) rollouts of JUDGE_MAX_TOKENS_PER_GROUP / 16 tokens each
(524,288 / 16 = 32,768), their results in the `dense` encoding (credit and advantage,
one JSON float per token, the largest form: about 1.4 MB a rollout, 22 MB the group); and
the other extreme, --size 4 rollouts of 131,072 tokens (JUDGE_MAX_TOKENS_PER_ROLLOUT),
about 5.4 MB a result; and the most rollouts a group may have, --size 256 (the bound of
JUDGE_MAX_GROUP_SIZE) --tokens 524288. The worker writes a group as
`jobs.groups.deliver_group` does: its results provisionally, a result longer than
`jobs.parts.PART_BYTES` in parts, in transactions of at most `jobs.parts.CALL_BYTES`
(HSET, guarded by WATCH: `jobs.group_queue.write_members`), then one commit that copies
no result (FINISH_GROUP). Each group is written twice, as when a worker paused past its
lease is taken over: a first holder writes every result, a second begins the group again
(BEGIN drops the first's results and parts) and writes and commits it; then the results
are read back as a results page reads them (`result_slice`, checked equal). Each call's
time inside Redis is read from Redis's own SLOWLOG (threshold 0, microseconds; a
transaction's time is the sum of its commands'), and a separate process PINGs Redis every
millisecond throughout, to see the stall other clients see. For comparison, the same
results written as one Lua script call (what a single atomic write of the group would
cost). Target: every call under 5 ms.

A private redis-server (no persistence) on a free port, so that no other client's
commands mix into the log.

    .venv/bin/python bench/bench_group_write.py [--repeats 5 --size 16 --tokens 524288]
        [--realtime]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import redis  # noqa: E402

from judge_service import credit as credit_mod  # noqa: E402
from judge_service.jobs import scripts  # noqa: E402
from judge_service.jobs.model import GroupWrite  # noqa: E402
from judge_service.jobs.parts import CALL_BYTES, PART_BYTES  # noqa: E402
from judge_service.jobs.queue import RedisJobStore  # noqa: E402
from judge_service.schemas import Options, Result, SpanOut  # noqa: E402
from judge_service.store.redis_store import RedisStore  # noqa: E402
from judge_service.wire_json import dump_json_str  # noqa: E402


def result_json(rid: str, tokens: int, rng: np.random.Generator) -> str:
    """A judged rollout's stored result at its largest: dense credit and advantage."""
    credit = rng.normal(0, 0.1, tokens)
    spans = [
        SpanOut(start=k * 400, end=k * 400 + 40, label="valid_progress", score=0.5,
                confidence=0.9, evidence="17 × 20 = 340, so 17 × 24 = 340 + 68 = 408")
        for k in range(64)
    ]  # fmt: skip
    result = Result(
        id=rid,
        status="ok",
        num_tokens=tokens,
        spans=spans,
        credit=credit_mod.encode(credit, "dense"),
        advantage=credit_mod.encode(credit - 0.25, "dense"),
    )
    return dump_json_str(result)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def ping(port: int, on: Any, done: Any, slowest: Any) -> None:
    """In a process of its own (no GIL shared with the writer): PING every millisecond,
    keeping the slowest answer (ms) seen while `on` is set."""
    client = redis.Redis(port=port)
    while not done.is_set():
        began = time.perf_counter()
        client.ping()
        took = (time.perf_counter() - began) * 1000
        if on.is_set() and took > slowest.value:
            slowest.value = took
        time.sleep(0.001)


async def one_group(jobs: RedisJobStore, results: list[str], whole: Any) -> None:
    """Create, claim and begin a one-group job, then write the group: as the worker does
    (taken over once, then committed and read back), or (`whole`, a registered script)
    all its results in one script call."""
    size = len(results)
    ids = [f"r{i}" for i in range(size)]
    payloads = [json.dumps({"rollout": {"id": i}}) for i in ids]
    payloads[0] = json.dumps({"rollout": {"id": "r0"}, "group": list(range(size))})
    options = Options(judge="rules", groupwise=True).model_dump_json(exclude_none=True)
    members = dict.fromkeys(range(1, size), 0)
    job_id, _ = await jobs.create("t", None, "fp", options, ids, payloads, members)
    (entry,) = await jobs.claim("first", size, block_s=1.0)
    assert (await jobs.begin(entry, "first", 3)).kind == "go"
    writes = list(enumerate(results))
    if whole is not None:
        out = jobs.keys.job(job_id, "out")
        await whole(keys=[out], args=[x for write in writes for x in write])
        await jobs.ack(entry)  # not left pending for the next group's taker to find
        return
    assert await jobs.write_members(entry, "first", writes) == 1
    (taken,) = await jobs.reclaim("second", min_idle_s=0.0, count=size)
    assert (await jobs.begin(taken, "second", 3)).kind == "go"
    assert await jobs.write_members(taken, "second", writes) == 1
    commit: list[GroupWrite] = [(i, None, "done") for i in range(size)]
    assert await jobs.finish_group(taken, commit, '{"group_id":"g","block":{}}', holder="second")
    assert await jobs.result_slice(job_id, 0, size) == results


# Commands of microseconds: their slowest is what the machine's load alone holds a call.
FLOOR = "WATCH, GET, MULTI, PING (no work: the machine's stall alone)"

# The whole group in one script call, for comparison.
ONE_CALL = "for k = 1, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[k], ARGV[k + 1]) end"


async def run(args: argparse.Namespace, port: int) -> None:
    raw = redis.Redis(port=port, decode_responses=True)
    raw.config_set("slowlog-log-slower-than", 0)
    raw.config_set("slowlog-max-len", 10_000)
    names = {
        hashlib.sha1(scripts.FINISH_GROUP.encode()).hexdigest(): "FINISH_GROUP (the commit)",
        hashlib.sha1(scripts.BEGIN.encode()).hexdigest(): "BEGIN",
        hashlib.sha1(ONE_CALL.encode()).hexdigest(): "one script with every result",
    }
    rng = np.random.default_rng(0)
    per = args.tokens // args.size
    results = [result_json(f"r{i}", per, rng) for i in range(args.size)]
    total = sum(len(r) for r in results)
    print(f"group of {args.size} x {per:,} tokens, dense: {total / 1e6:.1f} MB of results;")
    print(f"parts of at most {PART_BYTES / 1e6:.1f} MB, calls of {CALL_BYTES / 1e6:.1f} MB")
    store = RedisStore(f"redis://127.0.0.1:{port}/0", prefix="bench", cache_ttl_s=600)
    jobs = RedisJobStore(store.conn, ttl_s=600)
    await jobs.ensure_queue()
    whole = store.conn.client.register_script(ONE_CALL)
    await one_group(jobs, results, None)  # untimed: the scripts loaded
    await one_group(jobs, results, whole)
    on, done, slowest = multiprocessing.Event(), multiprocessing.Event(), multiprocessing.Value("d")
    pinger = multiprocessing.Process(target=ping, args=(port, on, done, slowest), daemon=True)
    pinger.start()
    rows: dict[str, list[float]] = {}
    try:
        for label, how in (("as the worker writes", None), ("one script call", whole)):
            for _ in range(args.repeats):
                raw.slowlog_reset()
                on.set()
                await one_group(jobs, results, how)
                on.clear()
                for name, ms in calls(raw.slowlog_get(10_000), names):
                    if how is None or name.startswith("one script"):
                        rows.setdefault(f"{label}: {name}", []).append(ms)
            rows.setdefault(f"{label}: slowest PING seen", []).append(slowest.value)
            slowest.value = 0.0
    finally:
        done.set()
        pinger.join()
        await store.close()
    print(f"\n{args.repeats} repeats; milliseconds inside Redis per call (SLOWLOG)\n")
    print("| call | calls | median ms | p95 ms | max ms | over 5 ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, values in rows.items():
        p95 = float(np.percentile(values, 95))
        median, over = statistics.median(values), sum(v > 5 for v in values)
        print(f"| {name} | {len(values)} | {median:.2f} | {p95:.2f} | {max(values):.2f} | {over} |")


def calls(log: list[dict[str, Any]], names: dict[str, str]) -> list[tuple[str, float]]:
    """The group's calls from a SLOWLOG, oldest first, as (call, ms). A transaction's
    commands are logged one by one after its MULTI as EXEC runs them (EXEC itself is not;
    other clients' PINGs may come between the MULTI and the EXEC, never inside), so the
    run of HSET, HDEL and EXPIRE of the job's results after a MULTI is one call, summed.
    A script is one entry (the commands it runs are logged after it, and are not counted
    again); a read is an HMGET of the results or of their parts."""
    found: list[tuple[str, float]] = []
    open_at: int | None = None
    multi = False  # a MULTI seen, its commands not yet
    for item in reversed(log):
        command = item["command"]
        command = command.decode() if isinstance(command, bytes) else command
        words, ms = command.split(), item["duration"] / 1000
        suffix = words[1].rsplit(":", 1)[-1] if len(words) > 1 else ""
        written = suffix in ("out", "parts", "nparts", "prov")
        if (multi or open_at is not None) and words[0] in ("HSET", "HDEL", "EXPIRE") and written:
            if open_at is None:
                found.append(("write_members (one transaction)", 0.0))
                open_at, multi = len(found) - 1, False
            found[open_at] = (found[open_at][0], found[open_at][1] + ms)
            continue
        open_at = None
        if words[0] in ("WATCH", "GET", "MULTI", "PING"):  # microseconds of work each
            found.append((FLOOR, ms))
        if words[0] == "MULTI":
            multi = True
        elif words[0] != "PING":
            multi = False
        if words[0] == "HMGET" and suffix in ("out", "parts"):
            found.append((f"read back (HMGET {suffix})", ms))
        elif words[0] == "EVALSHA" and words[1] in names:
            name = names[words[1]]
            if name == "BEGIN":  # each group is begun twice: by its first holder, its taker
                taker = sum(1 for n, _ in found if n.startswith("BEGIN")) % 2
                name = "BEGIN (the taker's)" if taker else "BEGIN (the first)"
            found.append((name, ms))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--size", type=int, default=16, help="JUDGE_MAX_GROUP_SIZE")
    parser.add_argument("--tokens", type=int, default=524_288, help="JUDGE_MAX_TOKENS_PER_GROUP")
    parser.add_argument(
        "--realtime",
        action="store_true",
        help="run redis-server under SCHED_FIFO (chrt, as root): on a loaded machine, other "
        "processes then cannot preempt it mid-command, so SLOWLOG shows what each call "
        "costs Redis itself (as on a host where Redis has a core of its own)",
    )
    args = parser.parse_args()
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("needs redis-server on PATH")
    port = free_port()
    with tempfile.TemporaryDirectory() as directory:
        server = subprocess.Popen(
            [*(["chrt", "-f", "10"] if args.realtime else []),
             binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", directory],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            for _ in range(100):
                try:
                    redis.Redis(port=port).ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            asyncio.run(run(args, port))
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
