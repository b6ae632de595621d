"""Failover figures from what the clients and haproxy recorded, and the summary as
markdown."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from bench.multihost.calls import BatchCall, Recorder
from bench.multihost.haproxy import Logged
from bench.multihost.workload import Attempt

OUTCOMES = ("clean", "via_haproxy_retry", "via_client_retry", "via_driver_retry", "failed")


def outcome(call: str, ok: bool, recorder: Recorder, attempts: dict[str, list[Attempt]],
            proxy_retried: Counter[str]) -> str:  # fmt: skip
    """The least that got a call through: nothing (clean); haproxy's own retry on the
    other replica (invisible to the client but for the time it took); the client's retry
    of a 503; the driver's retry of an error the client raised; or nothing did (failed)."""
    if not ok:
        return "failed"
    if call in recorder.driver_retries:
        return "via_driver_retry"
    if len(attempts.get(call, [])) > 1:
        return "via_client_retry"
    if proxy_retried[call]:
        return "via_haproxy_retry"
    return "clean"


def failover_figures(
    recorder: Recorder, cut: dict[str, Any], logged: list[Logged]
) -> dict[str, Any]:
    """How the calls fared across the cut, and how long the failover took. A batch call
    "during the cut" is one still unanswered at the cut or begun after it. Takes the
    clocks and the calls out of `cut` (they are not for the summary)."""
    cut_at: float = cut.pop("cut_at")
    survivor: str = cut["survivor"]
    calls: list[BatchCall] = cut.pop("batch_calls")
    attempts = recorder.by_call()
    proxy_retried = Counter(entry.call for entry in logged if entry.retries or entry.redispatched)
    during = [c for c in calls if c.ended > cut_at]
    before = [c.ended - c.began for c in calls if c.ended <= cut_at]
    batch = Counter(outcome(c.call, c.ok, recorder, attempts, proxy_retried) for c in during)
    late = [name for name in attempts if name.startswith("submit:late-")]

    def fared(call: str, ok: bool) -> str:
        return outcome(call, ok, recorder, attempts, proxy_retried)

    submissions = Counter(fared(n, any(a.status == 202 for a in attempts[n])) for n in late)
    helped = [c for c in during if fared(c.call, c.ok) != "clean"]
    answered = [
        a.ended for v in attempts.values() for a in v
        if a.began >= cut_at and a.status in (200, 202) and a.served_by == survivor
    ]  # fmt: skip
    errors = Counter(
        f"{a.path}: {a.status or 'no answer'}{' ' + a.error if a.error else ''}"
        for v in attempts.values()
        for a in v
        if a.ended > cut_at and a.status not in (200, 202)
    )
    return {
        "failover": {
            "haproxy_marked_down_s": cut.pop("haproxy_marked_down_s"),
            "first_ok_via_survivor_s": _after(min(answered, default=None), cut_at),
            # From then on every call went through as if nothing had happened.
            "last_helped_call_answered_s": (
                _after(max((c.ended for c in helped), default=None), cut_at) or 0.0
            ),
            "longest_batch_call_during_cut_s": _round(
                max((c.ended - c.began for c in during), default=None)
            ),
            "median_batch_call_before_cut_s": _round(statistics.median(before) if before else None),
            "worker_takeover_s": cut.pop("worker_takeover_s"),
        },
        "batch_calls_during_cut": {"total": len(during), **{k: batch[k] for k in OUTCOMES}},
        "batch_calls_before_cut": len(before),
        "submissions_after_cut": {"total": len(late), **{k: submissions[k] for k in OUTCOMES}},
        "error_answers_after_cut": dict(errors),
        "haproxy_retried_requests": sum(proxy_retried.values()),
        "driver_retries": dict(recorder.driver_retries),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _after(at: float | None, cut_at: float) -> float | None:
    return None if at is None else round(at - cut_at, 3)


def _phase(p: dict[str, Any]) -> str:
    return (
        f"{p['rollouts_per_s']} ({p['rollouts']} in {p['seconds']} s, machine busy "
        f"{p['machine_busy_share']:.0%}, {p['service_cpu_ms_per_rollout']} CPU ms/rollout)"
    )


def markdown(summary: dict[str, Any]) -> str:
    t, f, cut = summary["throughput"], summary["failover"], summary["cut"]
    cpu, llm = t["cpu_bound"], t["latency_bound"]

    def outcomes(counts: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in counts.items() if v or k == "total")

    paid, cut_paid = llm["sessions"], cut["llm_sessions"]
    rows = [
        ("rollouts in jobs (all phases) / lost",
         f"{summary['rollouts_in_jobs']} / {summary['lost']}"),
        ("problems (duplicates, missing, differing results)", len(summary["problems"])),
        ("rules judge (CPU-bound), 2 hosts (rollouts/s)", _phase(cpu["two_hosts"])),
        ("rules judge (CPU-bound), 1 host (rollouts/s)", _phase(cpu["one_host"])),
        ("rules judge: ratio 2 hosts / 1 host",
         f"{cpu['ratio_two_to_one']} ({summary['machine_cpus']} CPUs shared by every host)"),
        (f"LLM judge ({llm['provider_delay_s']} s a call), 2 hosts (rollouts/s)",
         _phase(llm["two_hosts"])),
        (f"LLM judge ({llm['provider_delay_s']} s a call), 1 host (rollouts/s)",
         _phase(llm["one_host"])),
        ("LLM judge: ratio 2 hosts / 1 host",
         f"{llm['ratio_two_to_one']} ({llm['worker_concurrency']} sessions per worker)"),
        ("LLM judge sessions (both phases): paid / paid twice / never paid",
         f"{paid['sessions']} / {paid['repaid']} / {paid['unpaid']}"),
        ("rollouts orphaned by the cut (its workers held them)",
         f"{cut['orphaned_at_cut']} (LLM judge: {cut['orphaned_llm_at_cut']})"),
        (f"LLM job across the cut ({cut['llm_rollouts']} rollouts): sessions paid / "
         "paid twice / never paid",
         f"{cut_paid['sessions']} / {cut_paid['repaid']} / {cut_paid['unpaid']}"),
        ("cut → haproxy marks the host DOWN (s)", f["haproxy_marked_down_s"]),
        ("cut → first OK answer via the survivor (s)", f["first_ok_via_survivor_s"]),
        ("cut → last call that needed a retry answered (s)", f["last_helped_call_answered_s"]),
        ("longest batch call across the cut (s)", f["longest_batch_call_during_cut_s"]),
        ("median batch call before the cut (s)", f["median_batch_call_before_cut_s"]),
        ("cut → the host's rollouts taken over (s)", f["worker_takeover_s"]),
        ("cut → every job finished (s)", cut["jobs_finished_after_cut_s"]),
        ("batch calls during the cut", outcomes(summary["batch_calls_during_cut"])),
        ("job submissions after the cut", outcomes(summary["submissions_after_cut"])),
    ]  # fmt: skip
    lines = ["| figure | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)
