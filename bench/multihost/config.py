"""What a multi-host run does: its sizes, clocks and settings (the driver and the cut
phase both read it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.multihost import haproxy


@dataclass(frozen=True)
class Config:
    cycles: int = 20  # a job holds cycles × 12 rollouts
    jobs: int = 6  # per throughput phase, and judged across the cut
    cut_at: float = 0.3  # the cut comes once this share of the cut's LLM job is judged
    late_jobs: int = 4  # small jobs submitted right after the cut, while haproxy fails over
    batch_threads: int = 2
    batch_max_calls: int = 2000  # per thread: the loops are bounded in count and time
    after_cut_s: float = 8.0  # batch calls go on this long after the cut
    job_timeout_s: float = 180.0
    dead_after_s: float = 5.0  # JUDGE_JOBS_DEAD_AFTER_S: a silent worker is dead after it
    llm_jobs: int = 2  # per latency-bound phase
    llm_rollouts: int = 160  # per job of the latency-bound phases
    # The LLM job judged across the cut, queued ahead of the rules jobs: the cut comes
    # while every worker holds sessions of it (8 each), so the victim dies mid-session.
    cut_llm_rollouts: int = 160
    timing: haproxy.Timing = field(default_factory=haproxy.Timing)
    logs: Path | None = None
