"""The scenario, in one deployment (host 1: Redis and haproxy; hosts 2 and 3: an API
replica and its workers each):

1. warm-up: one job, not measured (each worker's first rollouts load its tokenizer);
2. throughput with both hosts: a set of jobs, rollouts per second, judged by the rules
   judge (CPU-bound), then by a scripted LLM judge (latency-bound: provider.py);
3. the cut (cut.py): an LLM job, rules jobs and batch calls through haproxy; once part
   of the LLM job is judged, the host whose workers hold the most of it is cut off
   (link down, processes SIGKILLed); more jobs are submitted while haproxy fails over;
4. throughput with the survivor alone: the same job sets, fresh ids.

Every job of every phase is then read back: exactly one result per rollout, in order,
equal to the judgment of the same rollout in this process (rules) or judged as its
script says (LLM)."""

from __future__ import annotations

import os
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.multihost import haproxy
from bench.multihost.calls import Job, Recorder, make_jobs, make_llm_jobs, submit, verify, wait_all
from bench.multihost.config import Config
from bench.multihost.cut import cut_phase
from bench.multihost.deploy import Deployment, deployed
from bench.multihost.netns import Topology
from bench.multihost.provider import DELAY_S, WORKER_CONCURRENCY, Provider, provider
from bench.multihost.report import failover_figures
from bench.multihost.workload import reference


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
        warm = make_jobs("warm", 1, config.cycles) + make_llm_jobs(llm[0], "warm-llm", 1, 16)
        run_jobs(deployment, recorder, warm, config, expected)
        two = throughput(deployment, recorder, make_jobs("two", config.jobs, config.cycles),
                         config, expected)  # fmt: skip
        two_llm = throughput(deployment, recorder, llm_phase(llm[0], "two-llm", config),
                             config, expected)  # fmt: skip
        cut = cut_phase(deployment, recorder, llm[0], config, expected)
        one = throughput(deployment, recorder, make_jobs("one", config.jobs, config.cycles),
                         config, expected)  # fmt: skip
        one_llm = throughput(deployment, recorder, llm_phase(llm[0], "one-llm", config),
                             config, expected)  # fmt: skip
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


def llm_phase(llm: Provider, phase: str, config: Config) -> list[Job]:
    return make_llm_jobs(llm, phase, config.llm_jobs, config.llm_rollouts)


def ratio(two: dict[str, Any], one: dict[str, Any]) -> dict[str, Any]:
    return {
        "two_hosts": two,
        "one_host": one,
        "ratio_two_to_one": round(two["rollouts_per_s"] / one["rollouts_per_s"], 2),
    }


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
