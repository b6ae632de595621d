"""The scenario, in one deployment (host 1: Redis and haproxy; hosts 2 and 3: an API
replica and its workers each):

1. warm-up: one job, not measured (each worker's first rollouts load its tokenizer);
2. throughput with both hosts: a set of jobs, rollouts per second, judged by the rules
   judge (CPU-bound), then by a scripted LLM judge (latency-bound: provider.py);
3. the cut: jobs and batch calls through haproxy; once part of the jobs is judged, the
   host whose workers hold the most rollouts is cut off (link down, processes
   SIGKILLed); more jobs are submitted while haproxy fails over;
4. throughput with the survivor alone: the same job sets, fresh ids.

Every job of every phase is then read back: exactly one result per rollout, in order,
equal to the judgment of the same rollout in this process."""

from __future__ import annotations

import os
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.multihost import haproxy
from bench.multihost.calls import (
    BatchCall,
    Job,
    Recorder,
    batch_loop,
    make_jobs,
    submit,
    submit_all,
    verify,
    wait_all,
)
from bench.multihost.deploy import Deployment, deployed
from bench.multihost.netns import Host, Topology
from bench.multihost.provider import DELAY_S, WORKER_CONCURRENCY, Provider, provider
from bench.multihost.provider import OPTIONS as LLM_OPTIONS
from bench.multihost.report import failover_figures
from bench.multihost.workload import reference


@dataclass(frozen=True)
class Config:
    cycles: int = 20  # a job holds cycles × 12 rollouts
    jobs: int = 6  # per throughput phase, and judged across the cut
    cut_at: float = 0.3  # the cut comes once this share of the cut jobs is judged
    late_jobs: int = 4  # small jobs submitted right after the cut, while haproxy fails over
    batch_threads: int = 2
    batch_max_calls: int = 2000  # per thread: the loops are bounded in count and time
    after_cut_s: float = 8.0  # batch calls go on this long after the cut
    job_timeout_s: float = 180.0
    dead_after_s: float = 5.0  # JUDGE_JOBS_DEAD_AFTER_S: a silent worker is dead after it
    llm_jobs: int = 2  # per latency-bound phase
    llm_rollouts: int = 160  # per job of the latency-bound phases
    timing: haproxy.Timing = field(default_factory=haproxy.Timing)
    logs: Path | None = None


def run(config: Config) -> dict[str, Any]:
    """Deploy, measure, cut, verify, tear down (also on failure); the summary."""
    began = time.monotonic()
    expected = reference(config.cycles)  # before the servers start: it must not compete
    settings = {"JUDGE_JOBS_DEAD_AFTER_S": str(config.dead_after_s)}
    stack = ExitStack()
    llm: list[Provider] = []

    def llm_env(topology: Topology) -> dict[str, str]:
        # The provider listens on the bridge, which exists only once the hosts do.
        llm.append(stack.enter_context(provider(topology.gateway)))
        return llm[0].env()

    with stack, deployed(timing=config.timing, settings=settings, extra_env=llm_env,
                         logs=config.logs) as deployment:  # fmt: skip
        ready_s = time.monotonic() - began
        recorder = Recorder()
        warm = make_jobs("warm", 1, config.cycles) + llm_jobs(llm[0], "warm-llm", 1, 16)
        run_jobs(deployment, recorder, warm, config, expected)
        two = throughput(deployment, recorder, make_jobs("two", config.jobs, config.cycles),
                         config, expected)  # fmt: skip
        two_llm = throughput(deployment, recorder, llm_jobs(llm[0], "two-llm", config.llm_jobs,
                             config.llm_rollouts), config, expected)  # fmt: skip
        cut = cut_phase(deployment, recorder, config, expected)
        one = throughput(deployment, recorder, make_jobs("one", config.jobs, config.cycles),
                         config, expected)  # fmt: skip
        one_llm = throughput(deployment, recorder, llm_jobs(llm[0], "one-llm", config.llm_jobs,
                             config.llm_rollouts), config, expected)  # fmt: skip
        log = deployment.fleet.logs / f"{deployment.front.name}-haproxy.log"
        died = deployment.live_problems()
        tag, logs = deployment.topology.tag, deployment.fleet.logs
        llm_ids = [r["id"] for j in (*two_llm["jobs"], *one_llm["jobs"]) for r in j.rollouts]
        paid = llm[0].sessions_paid(llm_ids)
    phases = (two, two_llm, cut, one, one_llm)
    jobs: list[Job] = warm + [job for phase in phases for job in phase.pop("jobs")]
    figures = failover_figures(recorder, cut, haproxy.requests_logged(log))
    problems = [p for job in jobs for p in job.problems] + died
    return {
        "machine_cpus": os.cpu_count(),
        "rollouts_per_job": config.cycles * 12,
        "hosts_ready_s": round(ready_s, 1),
        "throughput": {
            "cpu_bound": {"judge": "rules", **ratio(two, one)},
            "latency_bound": {
                "judge": "scripted LLM",
                "provider_delay_s": DELAY_S,
                "worker_concurrency": WORKER_CONCURRENCY,
                "sessions": paid,
                **ratio(two_llm, one_llm),
            },
        },
        "cut": cut,
        **figures,
        "jobs": len(jobs),
        "rollouts_in_jobs": sum(len(job.rollouts) for job in jobs),
        # Accepted rollouts without a judged result (a job never accepted is a problem).
        "lost": sum(lost(j) for j in jobs if j.ids),
        "problems": problems,
        "run_tag": tag,
        "logs": str(logs),
        "run_s": round(time.monotonic() - began, 1),
    }


def run_jobs(deployment: Deployment, recorder: Recorder, jobs: list[Job], config: Config,
             expected: list[dict[str, Any]]) -> None:  # fmt: skip
    client, transport = recorder.client(deployment.url)
    with client:
        for job in jobs:
            submit(recorder, client, transport, job)
    wait_all(recorder, deployment.url, jobs, config.job_timeout_s)
    for job in jobs:
        verify(recorder, deployment.url, job, expected)


def lost(job: Job) -> int:
    return len(job.rollouts) - int(job.view.get("counts", {}).get("done", 0))


def ratio(two: dict[str, Any], one: dict[str, Any]) -> dict[str, Any]:
    return {
        "two_hosts": two,
        "one_host": one,
        "ratio_two_to_one": round(two["rollouts_per_s"] / one["rollouts_per_s"], 2),
    }


def llm_jobs(llm: Provider, phase: str, count: int, size: int) -> list[Job]:
    return [
        Job(f"{phase}-{n}", llm.rollouts(f"{phase}-{n}", size), options=LLM_OPTIONS)
        for n in range(count)
    ]


def throughput(deployment: Deployment, recorder: Recorder, jobs: list[Job], config: Config,
               expected: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    """The job set judged by whoever is up: rollouts per second from the first job
    created to the last finished (the servers' own clocks: one machine's); the machine's
    busy share and the service's CPU time per rollout over the same stretch."""
    machine, service = machine_busy(), service_cpu_s(deployment)
    run_jobs(deployment, recorder, jobs, config, expected)
    busy = machine_busy()
    used = service_cpu_s(deployment) - service
    finished = [j.view["finished_at"] for j in jobs if j.view.get("finished_at")]
    created = [j.view["created_at"] for j in jobs if j.view.get("created_at")]
    total = sum(len(j.rollouts) for j in jobs)
    span = (max(finished) - min(created)) if finished and created else float("inf")
    return {
        "jobs": jobs,
        "rollouts": total,
        "seconds": round(span, 2),
        "rollouts_per_s": round(total / span, 1),
        "machine_busy_share": round(1 - (busy[0] - machine[0]) / max(1, busy[1] - machine[1]), 2),
        "service_cpu_ms_per_rollout": round(used * 1000 / total, 2),
    }


def machine_busy() -> tuple[int, int]:
    """(idle, total) jiffies of every CPU since boot (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields[:8])  # idle + iowait; without guest time


def service_cpu_s(deployment: Deployment) -> float:
    """CPU seconds used so far by every live process of the deployment."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for proc in deployment.fleet.procs:
        try:
            stat = Path(f"/proc/{proc.popen.pid}/stat").read_text()
        except OSError:
            continue  # killed with its host
        total += sum(int(x) for x in stat.rsplit(")", 1)[1].split()[11:13])
    return total / tick


def cut_phase(deployment: Deployment, recorder: Recorder, config: Config,
              expected: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    jobs = make_jobs("cut", config.jobs, config.cycles)
    late = make_jobs("late", config.late_jobs, 2)
    stop = threading.Event()
    calls: list[BatchCall] = []
    threads = [
        threading.Thread(
            target=batch_loop,
            args=(recorder, deployment.url, f"t{n}", expected, stop, config.batch_max_calls, calls),
            daemon=True,
        )
        for n in range(config.batch_threads)
    ]
    # Submitted in the failover window, each with its own key: a submission whose answer
    # was lost is sent again with the same key and must find the same job. From a thread:
    # a submission stuck on the cut host must not stop the clocks.
    submitter = threading.Thread(target=submit_all, args=(recorder, deployment.url, late))
    client, transport = recorder.client(deployment.url)
    with client:
        for job in jobs:
            submit(recorder, client, transport, job)
        for thread in threads:
            thread.start()
        try:
            total = sum(len(j.rollouts) for j in jobs)
            victim = wait_to_cut(deployment, recorder, jobs, int(total * config.cut_at),
                                 config.job_timeout_s)  # fmt: skip
            cut_at = deployment.cut(victim)
            # Its link is down: no acknowledgement of its workers can arrive any more, so
            # what they hold now is exactly what the others must take over.
            pending = deployment.pending_by_consumer()
            orphaned = sum(pending.get(n, 0) for n in deployment.worker_names(victim))
            cut_wall = time.time() - (time.monotonic() - cut_at)  # job times are wall clock
            judged_at_cut = sum(j.view["counts"]["done"] for j in jobs)
            submitter.start()
            down_s, taken_over_s = watch(deployment, victim, cut_at, config)
            stop.wait(max(0.0, cut_at + config.after_cut_s - time.monotonic()))
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
            if submitter.ident is not None:
                submitter.join(timeout=config.job_timeout_s)
    everything = jobs + late
    wait_all(recorder, deployment.url, everything, config.job_timeout_s)
    for job in everything:
        verify(recorder, deployment.url, job, expected)
    finished = [j.view.get("finished_at") or 0.0 for j in everything]
    survivor = next(h for h in deployment.replicas if h is not victim)
    return {
        "jobs": everything,
        "victim": victim.name,
        "survivor": survivor.name,
        "cut_at": cut_at,
        "rollouts": sum(len(j.rollouts) for j in everything),
        "judged_at_cut": judged_at_cut,
        "orphaned_at_cut": orphaned,
        "haproxy_marked_down_s": down_s,
        "worker_takeover_s": taken_over_s,
        "jobs_finished_after_cut_s": round(max(finished) - cut_wall, 2),
        "batch_calls": calls,
    }


def wait_to_cut(deployment: Deployment, recorder: Recorder, jobs: list[Job], judged: int,
                timeout_s: float) -> Host:  # fmt: skip
    """Once `judged` rollouts are judged: the replica whose workers hold the most rollouts
    now (the cut must orphan some)."""
    client, transport = recorder.client(deployment.url)
    deadline = time.monotonic() + timeout_s
    with client:
        while time.monotonic() < deadline:
            done = 0
            for job in jobs:
                transport.call = f"poll:{job.key}"
                job.view = client.get_job(job.id).model_dump(mode="json")
                done += job.view["counts"]["done"]
            if done >= judged:
                pending = deployment.pending_by_consumer()
                held = {
                    h.name: sum(pending.get(n, 0) for n in deployment.worker_names(h))
                    for h in deployment.replicas
                }
                victim = max(deployment.replicas, key=lambda h: held[h.name])
                if held[victim.name] > 0:
                    return victim
            time.sleep(0.05)
    raise TimeoutError(f"the cut jobs did not reach {judged} judged rollouts in {timeout_s} s")


def watch(deployment: Deployment, victim: Host, cut_at: float,
          config: Config) -> tuple[float | None, float | None]:  # fmt: skip
    """Seconds from the cut to haproxy marking the victim DOWN, and to no rollout being
    held under its workers' names (taken over by the others); None: not in time."""
    names = deployment.worker_names(victim)
    down_s = taken_over_s = None
    deadline = cut_at + config.job_timeout_s
    polls = 0
    while (down_s is None or taken_over_s is None) and time.monotonic() < deadline:
        now = time.monotonic()
        if down_s is None and deployment.server_status().get(victim.name) == "DOWN":
            down_s = round(now - cut_at, 2)
        if taken_over_s is None and polls % 5 == 0:
            pending = deployment.pending_by_consumer()
            if not any(pending.get(n, 0) for n in names):
                taken_over_s = round(time.monotonic() - cut_at, 2)
        polls += 1
        time.sleep(0.02)
    return down_s, taken_over_s
