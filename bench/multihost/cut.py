"""The cut: one replica host cut off (link down, processes SIGKILLed) while jobs are
judged and batch calls run through haproxy.

The jobs, in queue order (the queue is first in, first out): one job for the scripted
LLM judge, then the rules jobs. The cut comes while the LLM job is judged, so the victim
dies in the middle of judge sessions: what a host loss costs in re-paid sessions is then
measured, not assumed. The rules jobs, accepted before the cut, are judged after it.
Small jobs are submitted right after the cut, while haproxy fails over."""

from __future__ import annotations

import threading
import time
from typing import Any

from bench.multihost.calls import (
    BatchCall,
    Job,
    Recorder,
    batch_loop,
    make_jobs,
    make_llm_jobs,
    submit,
    submit_all,
    verify,
    wait_all,
)
from bench.multihost.config import Config
from bench.multihost.deploy import Deployment
from bench.multihost.netns import Host
from bench.multihost.provider import Provider


def cut_phase(deployment: Deployment, recorder: Recorder, llm: Provider, config: Config,
              expected: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    llm_jobs = make_llm_jobs(llm, "cut-llm", 1, config.cut_llm_rollouts)
    jobs = llm_jobs + make_jobs("cut", config.jobs, config.cycles)
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
            victim = wait_to_cut(deployment, recorder, llm_jobs, config.cut_at,
                                 config.job_timeout_s)  # fmt: skip
            cut_at = deployment.cut(victim)
            # Its link is down: no acknowledgement of its workers can arrive any more, so
            # what they hold now is exactly what the others must take over.
            held = deployment.held_by_job(victim)
            cut_wall = time.time() - (time.monotonic() - cut_at)  # job times are wall clock
            submitter.start()
            down_s, taken_over_s = watch(deployment, victim, cut_at, config.job_timeout_s)
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
    llm_ids = {j.id for j in llm_jobs if j.ids}
    return {
        "jobs": everything,
        "victim": victim.name,
        "survivor": survivor.name,
        "cut_at": cut_at,
        "rollouts": sum(len(j.rollouts) for j in everything),
        "llm_rollouts": sum(len(j.rollouts) for j in llm_jobs),
        "orphaned_at_cut": sum(held.values()),
        "orphaned_llm_at_cut": sum(n for job_id, n in held.items() if job_id in llm_ids),
        # Judge sessions of the LLM job: those the victim held are paid again (their
        # sessions were cut off, or their results never acknowledged).
        "llm_sessions": llm.sessions_paid([r["id"] for j in llm_jobs for r in j.rollouts]),
        "haproxy_marked_down_s": down_s,
        "worker_takeover_s": taken_over_s,
        "jobs_finished_after_cut_s": round(max(finished) - cut_wall, 2),
        "batch_calls": calls,
    }


def wait_to_cut(deployment: Deployment, recorder: Recorder, jobs: list[Job], share: float,
                timeout_s: float) -> Host:  # fmt: skip
    """Once `share` of `jobs` is judged: the replica whose workers hold the most of their
    rollouts now (the cut must orphan some of them)."""
    client, transport = recorder.client(deployment.url)
    ids = {job.id for job in jobs}
    judged = int(share * sum(len(job.rollouts) for job in jobs))
    deadline = time.monotonic() + timeout_s
    with client:
        while time.monotonic() < deadline:
            done = 0
            for job in jobs:
                transport.call = f"poll:{job.key}"
                job.view = client.get_job(job.id).model_dump(mode="json")
                done += job.view["counts"]["done"]
            if done >= judged:
                held = {
                    h.name: sum(n for j, n in deployment.held_by_job(h).items() if j in ids)
                    for h in deployment.replicas
                }
                victim = max(deployment.replicas, key=lambda h: held[h.name])
                if held[victim.name] > 0:
                    return victim
            time.sleep(0.05)
    raise TimeoutError(f"no host held rollouts of {sorted(ids)} after {judged} were judged")


def watch(deployment: Deployment, victim: Host, cut_at: float,
          timeout_s: float) -> tuple[float | None, float | None]:  # fmt: skip
    """Seconds from the cut to haproxy marking the victim DOWN, and to no rollout being
    held under its workers' names (taken over by the others); None: not in time."""
    names = deployment.worker_names(victim)
    down_s = taken_over_s = None
    deadline = cut_at + timeout_s
    polls = 0
    while (down_s is None or taken_over_s is None) and time.monotonic() < deadline:
        now = time.monotonic()
        if down_s is None and deployment.server_status().get(victim.name) == "DOWN":
            down_s = round(now - cut_at, 2)
        # Redis less often than the stats socket: takeover is seconds, DOWN a fraction.
        if taken_over_s is None and polls % 5 == 0:
            pending = deployment.pending_by_consumer()
            if not any(pending.get(n, 0) for n in names):
                taken_over_s = round(time.monotonic() - cut_at, 2)
        polls += 1
        time.sleep(0.02)
    return down_s, taken_over_s
